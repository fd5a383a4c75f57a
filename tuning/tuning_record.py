"""A tuning record as Python reads it: the record (what a build reads: tuning/record.hpp) merged
with the search's log beside it (RECORD.search.json: the measured schedules, the cases, each
class's score, noise and spend), as tuning/record.cpp's load merges them."""
import json
import os


def search_log_path(record_path):
    """record.cpp's search_log_path: ".json" replaced by ".search.json"."""
    stem = record_path[:-len(".json")] if record_path.endswith(".json") and len(record_path) > 5 else record_path
    return stem + ".search.json"


def load(record_path, need_log=False):
    """The record with its log's members; without a log, empty lists (or an error with need_log)."""
    record = json.load(open(record_path))
    log_path = search_log_path(record_path)
    if not os.path.exists(log_path):
        if need_log:
            raise SystemExit(f"{record_path}: its search log {log_path} is not beside it")
        log = {"cases": [], "runtime_times": [], "candidates": [], "classes": {}}
    else:
        log = json.load(open(log_path))
    for member in ("cases", "runtime_times", "candidates"):
        record[member] = log[member]
    for k in record["classes"]:
        k.update(log["classes"].get(k["name"], {}))
    return record
