#!/usr/bin/env python3
"""Checks that every function of NCCL's C API has its reccl counterpart (ncclX -> recclX).

The names are the declarations of nccl.h (`ncclResult_t  ncclX(` and `const char*  ncclX(`; the
profiling `pncclX` twins are not API of their own) and of reccl.h (`recclResult_t recclX(`,
`const char* recclX(`), so code written for that NCCL ports by renaming.

  scripts/check_nccl_parity.py NCCL_H RECCL_H   # exit 77 (skip) when NCCL_H does not exist
  scripts/check_nccl_parity.py --self-test      # the checker against planted headers

Exit: 0 every NCCL function has one, 1 some have not (each named), 64 usage, 77 no nccl.h here.
"""
import pathlib
import re
import sys
import tempfile

NCCL_FN = re.compile(r'^\s*(?:ncclResult_t|const\s+char\s*\*)\s+nccl([A-Za-z0-9_]+)\s*\(', re.M)
RECCL_FN = re.compile(r'(?:recclResult_t|const\s+char\s*\*)\s+reccl([A-Za-z0-9_]+)\s*\(')


def missing(nccl_text, reccl_text):
    theirs = set(NCCL_FN.findall(nccl_text))
    ours = set(RECCL_FN.findall(reccl_text))
    return sorted(theirs - ours), len(theirs)


def check(nccl_h, reccl_h):
    nccl = pathlib.Path(nccl_h)
    if not nccl.is_file():
        print(f'check_nccl_parity: no {nccl_h} here (the CUDA toolkit brings it): nothing to compare')
        return 77
    gone, total = missing(nccl.read_text(errors='replace'), pathlib.Path(reccl_h).read_text())
    for name in gone:
        print(f'{reccl_h}: no reccl{name} for nccl{name} ({nccl_h})')
    if not gone:
        print(f'check_nccl_parity: all {total} functions of {nccl_h} have their reccl counterpart')
    return 1 if gone else 0


def self_test():
    nccl = ('ncclResult_t  ncclAllReduce(const void* s);\nncclResult_t pncclAllReduce(const void* s);\n'
            'const char*  ncclGetErrorString(ncclResult_t r);\nncclResult_t  ncclGroupSimulateEnd(void* i);\n')
    full = ('RECCL_API recclResult_t recclAllReduce(const void* s);\nRECCL_API const char* recclGetErrorString(int r);\n'
            'RECCL_API recclResult_t recclGroupSimulateEnd(void* i);\n')
    short = full.replace('recclGroupSimulateEnd', 'recclGroupSimulate')
    failures = []
    with tempfile.TemporaryDirectory() as d:
        n, r_full, r_short = (pathlib.Path(d) / x for x in ('nccl.h', 'full.h', 'short.h'))
        n.write_text(nccl)
        r_full.write_text(full)
        r_short.write_text(short)
        if check(n, r_full) != 0:
            failures.append('a complete header was refused')
        if check(n, r_short) != 1:
            failures.append('a header without recclGroupSimulateEnd passed')
        if check(pathlib.Path(d) / 'absent.h', r_full) != 77:
            failures.append('an absent nccl.h was not a skip')
    for f in failures:
        print('self-test:', f)
    return 1 if failures else 0


def main(argv):
    if argv == ['--self-test']:
        return self_test()
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print('usage: check_nccl_parity.py NCCL_H RECCL_H | --self-test', file=sys.stderr)
        return 64
    return check(*argv)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
