// The subcommands behind one entry point. Errors never escape as crashes: library and file
// errors return 1, command-line mistakes 2.
#include "cli.hpp"

#include <cstdio>
#include <exception>
#include <new>

#include "apply_command.hpp"
#include "cli_args.hpp"
#include "demo_command.hpp"
#include "grad_command.hpp"
#include "magi2norm/magi2norm.hpp"
#include "mhc_logits_command.hpp"

namespace magi2norm::cli {
namespace {

const char kUsage[] =
    "usage:\n"
    "  magi2-norm apply IN.safetensors OUT.safetensors [--dim N] [--eps E] [--num-modality M]\n"
    "                   [--num-patterns P] [--out-dtype f32|bf16|f16] [--threads N]\n"
    "      Normalizes IN's `x` with IN's `weight`, grouped by `modality` (I32 ids per token) or\n"
    "      `group_sizes` (I32/I64) when present; parameters come from IN's __metadata__ unless a\n"
    "      flag overrides them. Writes `y` (in the output dtype) and `y_f32` (pre-cast) to OUT,\n"
    "      which appears whole or not at all (an error or SIGINT/SIGTERM leaves it as it was).\n"
    "  magi2-norm grad IN.safetensors OUT.safetensors [apply's flags] [--dx-dtype f32|bf16|f16]\n"
    "      The backward: from IN's `x`, `dy` (the output's gradient), `weight` and grouping, with\n"
    "      apply's parameters plus dx_dtype (default: x's), writes `dx`, `dweight` (the weight's\n"
    "      dtype), `dx_f32` and `dscale_f32` (the FP32 results before their casts) to OUT, whole or\n"
    "      not at all.\n"
    "  magi2-norm mhc-logits IN.safetensors OUT.safetensors [apply's flags]\n"
    "      The mHC logits: from IN's `x` ([T, D] or [T, S, C]), `weight`, `phi` ([D, N] F32) and\n"
    "      grouping, with apply's parameters (dim: x's row by default), writes `logits` ([T, N]\n"
    "      F32, float32(norm(x)) @ phi) and `inverse_rms` ([T] F32) to OUT, whole or not at all.\n"
    "  magi2-norm demo [--tokens T] [--threads N] [--json]\n"
    "      Times the MAGI-2 Preview norms on T (default 4096) synthetic tokens against the\n"
    "      machine's copy bandwidth and checks sampled rows against a scalar reference.\n"
    "  magi2-norm --help\n";

int fail(int status, const std::string &message) {
    std::fprintf(stderr, "magi2-norm: error: %s\n", message.c_str());
    if (status == 2) std::fprintf(stderr, "%s", kUsage);
    return status;
}

}  // namespace

int run_cli(const std::vector<std::string> &args) {
    if (args.empty()) return fail(2, "no command");
    for (const std::string &arg : args) {
        if (arg == "--help" || arg == "-h") {
            std::printf("%s", kUsage);
            return 0;
        }
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    try {
        if (args[0] == "apply") return run_apply(rest);
        if (args[0] == "grad") return run_grad(rest);
        if (args[0] == "mhc-logits") return run_mhc_logits(rest);
        if (args[0] == "demo") return run_demo(rest);
        return fail(2, "unknown command '" + args[0] + "'");
    } catch (const UsageError &e) {
        return fail(2, e.what());
    } catch (const Error &e) {
        // what() reads "magi2norm: <code>: <message>"; the tool's own prefix stands in for the
        // library's, so the line reads "magi2-norm: error: <code>: <message>".
        const std::string message = e.what(), library = "magi2norm: ";
        return fail(1, message.rfind(library, 0) == 0 ? message.substr(library.size()) : message);
    } catch (const std::bad_alloc &) {
        return fail(1, "out of memory (the input, its output or, for demo, --tokens is too large for this machine)");
    } catch (const std::exception &e) {  // file errors
        return fail(1, e.what());
    }
}

}  // namespace magi2norm::cli
