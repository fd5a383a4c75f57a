#include "output_file.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "magi2norm/magi2norm.hpp"

namespace magi2norm::cli {
namespace {

// The temporary file a signal must remove, set while one exists (the tool writes one at a time).
// The handler may only touch these and call async-signal-safe functions.
char g_temp[4096];
volatile std::sig_atomic_t g_temp_set = 0;

extern "C" void remove_temp_and_reraise(int signal) {
    if (g_temp_set) ::unlink(g_temp);
    std::signal(signal, SIG_DFL);
    std::raise(signal);  // ends the process as the signal would have, status and all
}

// Holds SIGINT and SIGTERM back while the temporary file is created and its name recorded, so
// that no signal finds a file the handler does not know of.
class SignalsHeld {
public:
    SignalsHeld() {
        sigset_t held;
        sigemptyset(&held);
        sigaddset(&held, SIGINT);
        sigaddset(&held, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &held, &old_);
    }
    ~SignalsHeld() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

private:
    sigset_t old_;
};

// A signal the host ignores (nohup, a background job) stays ignored.
void catch_signal(int signal, struct sigaction &old) {
    sigaction(signal, nullptr, &old);
    if (old.sa_handler == SIG_IGN) return;
    struct sigaction action {};
    action.sa_handler = remove_temp_and_reraise;
    sigemptyset(&action.sa_mask);
    sigaction(signal, &action, nullptr);
}

std::chrono::milliseconds write_delay() {
    const char *text = std::getenv("MAGI2NORM_TEST_WRITE_DELAY_MS");
    return std::chrono::milliseconds(text ? std::atol(text) : 0);
}

[[noreturn]] void fail(const std::string &path, const std::string &problem) {
    throw Error(ErrorCode::io, path + ": " + problem + ": " + std::strerror(errno));
}

}  // namespace

OutputFile::OutputFile(const std::string &path) : path_(path) {
    namespace fs = std::filesystem;
    if (path.empty()) throw Error(ErrorCode::io, "empty output path");
    std::error_code error;
    const fs::path resolved = fs::weakly_canonical(path, error);
    target_ = error ? path : resolved.string();
    if (fs::is_directory(target_, error)) throw Error(ErrorCode::io, path + ": is a directory, not a file");

    const SignalsHeld held;
    for (int n = 0; fd_ < 0; ++n) {
        temp_ = target_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(n);
        fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd_ < 0 && (errno != EEXIST || n == 100)) fail(path, "cannot create " + temp_);
    }
    // A file that is replaced keeps its permissions.
    struct stat existing {};
    const bool kept = ::stat(target_.c_str(), &existing) != 0 || ::fchmod(fd_, existing.st_mode & 07777) == 0;
    if (!kept || temp_.size() >= sizeof g_temp) {
        const int why = errno;
        ::close(fd_);
        ::unlink(temp_.c_str());
        errno = why;
        if (!kept) fail(path, "cannot set the permissions of " + temp_);
        throw Error(ErrorCode::io, path + ": path too long");
    }
    std::memcpy(g_temp, temp_.c_str(), temp_.size() + 1);
    g_temp_set = 1;
    catch_signal(SIGINT, old_int_);
    catch_signal(SIGTERM, old_term_);
}

OutputFile::~OutputFile() {
    discard();
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
}

void OutputFile::discard() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (g_temp_set) ::unlink(temp_.c_str());
    g_temp_set = 0;
}

void OutputFile::write(const void *data, std::size_t size) {
    constexpr std::size_t kChunk = 1u << 20;
    static const std::chrono::milliseconds delay = write_delay();
    const char *p = static_cast<const char *>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd_, p, size < kChunk ? size : kChunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail(path_, "cannot write " + temp_);
        p += n;
        size -= static_cast<std::size_t>(n);
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
    }
}

void OutputFile::commit() {
    if (::fsync(fd_) != 0) fail(path_, "cannot write " + temp_);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(path_, "cannot write " + temp_);
    if (std::rename(temp_.c_str(), target_.c_str()) != 0) fail(path_, "cannot rename " + temp_);
    g_temp_set = 0;
    // The rename itself on disk: the folder's entry.
    const int folder = ::open(std::filesystem::path(target_).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder >= 0) {
        ::fsync(folder);
        ::close(folder);
    }
}

void write_output_file(const std::string &path, const std::vector<safetensors::OutputTensor> &tensors,
                       const std::map<std::string, std::string> &metadata) {
    const safetensors::Encoded encoded = safetensors::encode(path, tensors, metadata);
    OutputFile out(path);
    out.write(encoded.head.data(), encoded.head.size());
    for (const auto &[data, size] : encoded.data) out.write(data, size);
    out.commit();
}

}  // namespace magi2norm::cli
