#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <vector>

#include "machine.hpp"

namespace magi2norm::tuning {

namespace {

// "name<blanks>: value" -> value, when `line` holds the key `name` exactly.
bool value_of(const std::string &line, const std::string &name, std::string &value) {
    if (line.compare(0, name.size(), name) != 0) return false;
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.find_first_not_of(" \t", name.size()) != colon) return false;
    value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    return true;
}

// A decimal key's value; -1 when it is none.
int number(const std::string &value) {
    return !value.empty() && std::isdigit(static_cast<unsigned char>(value[0])) ? std::stoi(value) : -1;
}

std::string read_word(const std::string &path) {
    std::ifstream in(path);
    std::string word;
    in >> word;
    return word;
}

// "48K", "2048K", "32M" -> bytes; 0 when unreadable.
std::int64_t size_bytes(const std::string &text) {
    if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return 0;
    std::int64_t value = std::stoll(text);
    if (text.find('K') != std::string::npos) value <<= 10;
    if (text.find('M') != std::string::npos) value <<= 20;
    if (text.find('G') != std::string::npos) value <<= 30;
    return value;
}

}  // namespace

void read_cpu_keys(Machine &m, const std::string &cpuinfo, const std::string &cache_dir) {
    std::ifstream in(cpuinfo);
    std::set<std::string> cores;
    std::string physical = "0", value;
    int threads = 0;
    bool first = true;
    for (std::string line; std::getline(in, line);) {
        if (value_of(line, "processor", value)) {
            ++threads;
            first = threads == 1;
            physical = "0";
        } else if (first && value_of(line, "vendor_id", value)) {
            m.vendor = value;
        } else if (first && value_of(line, "model name", value)) {
            m.cpu = value;
        } else if (first && value_of(line, "cpu family", value)) {
            m.family = number(value);
        } else if (first && value_of(line, "model", value)) {
            m.model = number(value);
        } else if (first && value_of(line, "stepping", value)) {
            m.stepping = number(value);
        } else if (value_of(line, "physical id", value)) {
            physical = value;
        } else if (value_of(line, "core id", value)) {
            cores.insert(physical + ":" + value);
        }
    }
    m.threads = std::max(threads, 1);
    m.cores = cores.empty() ? m.threads : static_cast<int>(cores.size());
    // The first index of each level (not an instruction cache), in the folder's order.
    m.l1d = m.l2 = m.l3 = 0;
    for (int i = 0; i < 16; ++i) {
        const std::string dir = cache_dir + "/index" + std::to_string(i);
        const std::string level = read_word(dir + "/level"), type = read_word(dir + "/type");
        if (level.empty()) continue;
        const std::int64_t bytes = size_bytes(read_word(dir + "/size"));
        if (level == "1" && type == "Data" && m.l1d == 0) m.l1d = bytes;
        if (level == "2" && type != "Instruction" && m.l2 == 0) m.l2 = bytes;
        if (level == "3" && type != "Instruction" && m.l3 == 0) m.l3 = bytes;
    }
}

std::string machine_difference(const Machine &record, const Machine &here) {
    const std::vector<std::pair<std::string, std::pair<std::string, std::string>>> keys = {
        {"machine.vendor", {record.vendor, here.vendor}},
        {"machine.family", {std::to_string(record.family), std::to_string(here.family)}},
        {"machine.model", {std::to_string(record.model), std::to_string(here.model)}},
        {"machine.stepping", {std::to_string(record.stepping), std::to_string(here.stepping)}},
        {"machine.cpu", {record.cpu, here.cpu}},
        {"machine.isa", {record.isa, here.isa}},
        {"machine.cores", {std::to_string(record.cores), std::to_string(here.cores)}},
        {"machine.threads", {std::to_string(record.threads), std::to_string(here.threads)}},
        {"machine.caches.l2", {std::to_string(record.l2), std::to_string(here.l2)}},
        {"machine.caches.l3", {std::to_string(record.l3), std::to_string(here.l3)}}};
    for (const auto &[name, values] : keys) {
        if (values.first != values.second) return name + ": the record's " + values.first + ", this machine's " + values.second;
    }
    return "";
}

}  // namespace magi2norm::tuning
