#include "confirm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "bench.hpp"

namespace magi2norm::tuning {

namespace {

double now() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string interval_text(const RatioInterval &r) {
    char text[96];
    std::snprintf(text, sizeof text, "%.3fx, 95%% interval [%.3f, %.3f] over %d rounds", r.estimate, r.lower, r.upper, r.rounds);
    return text;
}

}  // namespace

Confirmation judge(const std::vector<CaseRounds> &cases) {
    Confirmation c;
    std::size_t rounds = cases.empty() ? 0 : cases.front().default_s.size();
    for (const CaseRounds &k : cases) rounds = std::min({rounds, k.default_s.size(), k.pick_s.size()});
    std::vector<double> class_logs(rounds, 0.0);
    std::string slower;
    for (const CaseRounds &k : cases) {
        std::vector<double> logs;
        for (std::size_t r = 0; r < std::min(k.default_s.size(), k.pick_s.size()); ++r) {
            logs.push_back(std::log(k.default_s[r] / k.pick_s[r]));
            if (r < rounds) class_logs[r] += logs.back() / static_cast<double>(cases.size());
        }
        c.cases[k.case_id] = ratio_interval(logs);
        if (slower.empty() && c.cases[k.case_id].upper < 1) slower = k.case_id;
    }
    c.speedup = ratio_interval(class_logs);
    if (rounds < 2) {
        c.status = "not shipped: fewer than 2 rounds";
    } else if (!slower.empty()) {
        c.status = "not shipped: slower on " + slower + " (" + interval_text(c.cases.at(slower)) + ")";
    } else if (c.speedup.lower > 1) {
        c.status = "shipped: " + interval_text(c.speedup);
    } else {
        c.status = "not shipped: " + interval_text(c.speedup) + ", which does not lie above 1";
    }
    return c;
}

bool ships(const Confirmation &c) { return c.status.rfind("shipped", 0) == 0; }

void confirm_picks(Record &record, Compiler &compiler, const ConfirmOptions &options) {
    const double end = now() + options.seconds;
    std::vector<ClassResult *> picks;
    for (ClassResult &c : record.classes) {
        c.confirmation = Confirmation{};
        c.significant = false;
        if (c.best.empty()) {
            c.confirmation.status = "no pick: nothing beat the defaults in the search";
        } else {
            picks.push_back(&c);
        }
    }
    for (std::size_t i = 0; i < picks.size(); ++i) {
        ClassResult &klass = *picks[i];
        const double start = now();
        const Measured *pick = nullptr;
        for (const Measured &m : record.measured) {
            if (m.id == klass.best) pick = &m;
        }
        std::vector<std::unique_ptr<CaseBench>> benches;
        std::vector<detail::KernelEntry> defaults, entries;  // per case: the defaults', the pick's
        std::string failure;
        Schedule default_schedule;
        default_schedule.config = default_config(knob_scope(klass.klass, false));
        for (const TuneCase &c : record.cases) {
            if (!failure.empty() || class_of(c).name != klass.klass.name) continue;
            if (!pick || !pick->variants.count(c.id)) {
                failure = "the record names no variant of the pick for " + c.id;
                break;
            }
            benches.push_back(std::make_unique<CaseBench>(c, klass.klass, record.machine, Backend::cpu));
            CaseBench &bench = *benches.back();
            const detail::KernelEntry entry = bench.library_kernel();
            const Variant v = compiler.load(pick->variants.at(c.id), entry);
            const Variant d = compiler.make({request_for(default_schedule, entry, record.machine.isa)}).front();
            const std::vector<unsigned char> expected = bench.output(nullptr);
            if (!v.error.empty()) failure = "cannot load the pick for " + c.id + ": " + v.error;
            else if (!d.error.empty()) failure = "cannot make the defaults for " + c.id + ": " + d.error;
            else if (bench.output(&v.entry) != expected) failure = "its output on " + c.id + " differs from the library's";
            else if (bench.output(&d.entry) != expected) failure = "the defaults' output on " + c.id + " differs from the library's";
            entries.push_back(v.entry);
            defaults.push_back(d.entry);
        }
        if (failure.empty() && benches.empty()) failure = "the record has no case of the class";
        if (!failure.empty()) {
            klass.confirmation.status = "not shipped: " + failure;
        } else {
            // Rounds from the time left: one round (after the untimed one) of every case, timed.
            const double before = now();
            for (std::size_t k = 0; k < benches.size(); ++k) benches[k]->measure({&defaults[k], &entries[k]}, 1, false);
            const double round_s = std::max((now() - before) / 2, 1e-6);
            const double share = (end - now()) / static_cast<double>(picks.size() - i);
            const int rounds = static_cast<int>(std::clamp(share / round_s, double(options.min_rounds), double(options.max_rounds)));
            std::vector<CaseRounds> measured;
            for (std::size_t k = 0; k < benches.size(); ++k) {
                const CaseBench::Times t = benches[k]->measure({&defaults[k], &entries[k]}, rounds, false);
                measured.push_back({"", t.kernels[0], t.kernels[1]});
            }
            std::size_t k = 0;
            for (const TuneCase &c : record.cases) {
                if (class_of(c).name == klass.klass.name) measured[k++].case_id = c.id;
            }
            klass.confirmation = judge(measured);
        }
        klass.confirmation.seconds = now() - start;
        klass.significant = ships(klass.confirmation);
        std::printf("  %-26s %s\n", klass.klass.name.c_str(), klass.confirmation.status.c_str());
        std::fflush(stdout);
    }
}

}  // namespace magi2norm::tuning
