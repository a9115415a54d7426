#!/usr/bin/env python3
"""A reader of the text nccl-tests' *_perf programs print, written from that format alone:
'#' lines (the run line, the device lines, the three column-header lines, the footer) and rows of
whitespace-separated fields: size, count, type, redop, root, then per part (out-of-place, then
in-place) time, algbw, busbw, #wrong (and i_min, i_max, i_p99, i_cv% with -I), then an optional
timestamp. A part may be left blank; #wrong may read N/A (results not checked); every other cell
must be a number. Lines that are neither (a library's log lines, NCCL_DEBUG=INFO's among them)
are counted and skipped. Used by the tests to show that reccl-bench's output reads as
nccl-tests' does.

    nccl_tests_output.py FILE     prints what it read as JSON; exit 1 naming the first bad line
"""
import json
import re
import sys

ROW_PREFIX = 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 6  # size, count, type, redop, root and their gaps
RUN_LINE = re.compile(r"nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\S+)\((factor|bytes)\) "
                      r"warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+)")
DEVICE_LINE = re.compile(r"Rank\s+(\d+) Group\s+(\d+) Pid\s+(\d+) on\s+(\S+) device\s+(-?\d+) \[([^\]]*)\] ?(.*)")
FOOTER_LINE = re.compile(r"(Out of bounds values|Avg bus bandwidth)\s*:\s*(\S+)\s*(\S*)")


class FormatError(Exception):
    pass


def number(text, what, lineno):
    try:
        return float(text)
    except ValueError:
        raise FormatError(f"line {lineno}: {what} '{text}' is not a number")


def parse(text):
    out = {"run": None, "devices": [], "columns": None, "rows": [], "out_of_bounds": None,
           "out_of_bounds_ok": None, "avg_bus_bandwidth": None, "concluded": False, "other_lines": 0}
    part_cols = None
    timestamps = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            body = line[1:].strip()
            m = RUN_LINE.match(body)
            if m:
                out["run"] = {"nthreads": int(m[1]), "ngpus": int(m[2]), "min_bytes": int(m[3]),
                              "max_bytes": int(m[4]), "step": float(m[5]), "step_kind": m[6],
                              "warmup_iters": int(m[7]), "iters": int(m[8]), "agg_iters": int(m[9]),
                              "validation": int(m[10])}
                continue
            m = DEVICE_LINE.match(body)
            if m:
                out["devices"].append({"rank": int(m[1]), "group": int(m[2]), "pid": int(m[3]),
                                       "hostname": m[4], "device": int(m[5]), "device_hex": m[6], "info": m[7]})
                continue
            words = body.split()
            if words[:5] == ["size", "count", "type", "redop", "root"]:
                cols = words[5:]
                timestamps = bool(cols) and cols[-1] == "timestamp"
                if timestamps:
                    cols = cols[:-1]
                half = len(cols) // 2
                if half < 4 or cols[:half] != cols[half:] or cols[1:4] != ["algbw", "busbw", "#wrong"]:
                    raise FormatError(f"line {lineno}: unexpected column header {words}")
                part_cols = cols[:half]
                out["columns"] = cols
                continue
            m = FOOTER_LINE.match(body)
            if m:
                if m[1] == "Out of bounds values":
                    out["out_of_bounds"] = int(m[2])
                    out["out_of_bounds_ok"] = m[3] == "OK"
                else:
                    out["avg_bus_bandwidth"] = number(m[2], "average bus bandwidth", lineno)
                continue
            if body.startswith("Collective test concluded"):
                out["concluded"] = True
            continue
        if not line.strip():
            continue
        if not re.match(r"\s*\d+\s", line):
            out["other_lines"] += 1
            continue
        if part_cols is None:
            raise FormatError(f"line {lineno}: a row before the column header")
        fields = line.split()
        if len(fields) < 5:
            raise FormatError(f"line {lineno}: {len(fields)} fields")
        row = {"size": int(number(fields[0], "size", lineno)), "count": int(number(fields[1], "count", lineno)),
               "type": fields[2], "redop": fields[3], "root": int(number(fields[4], "root", lineno))}
        rest = fields[5:]
        if timestamps:
            if len(rest) < 2:
                raise FormatError(f"line {lineno}: no timestamp")
            row["timestamp"] = " ".join(rest[-2:])
            rest = rest[:-2]
        width = len(part_cols)
        if len(rest) not in (width, 2 * width):
            raise FormatError(f"line {lineno}: {len(rest)} cells after root, not {width} or {2 * width}")
        parts = [rest[:width], rest[width:]] if len(rest) == 2 * width else [rest]
        if len(parts) == 1:  # one part blank: which one the blank columns say
            oop_blank = not line[ROW_PREFIX:ROW_PREFIX + 8].strip()
            parts = [None, parts[0]] if oop_blank else [parts[0], None]
        for name, cells in zip(("out_of_place", "in_place"), parts):
            if cells is None:
                row[name] = None
                continue
            values = {}
            for col, cell in zip(part_cols, cells):
                if col == "#wrong":
                    values["wrong"] = None if cell == "N/A" else int(number(cell, "#wrong", lineno))
                else:
                    values[col] = number(cell, col, lineno)
            row[name] = values
        out["rows"].append(row)
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 64
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        print(json.dumps(parse(text)))
    except FormatError as e:
        print(f"nccl_tests_output: {argv[1]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
