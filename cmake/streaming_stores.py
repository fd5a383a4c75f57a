#!/usr/bin/env python3
"""Streaming (non-temporal) stores for one output buffer of a Halide-generated LLVM module, and
its prefetches into L2.

Halide 21 has no schedule directive for non-temporal stores (upstream added Func::stream_stores()
after 21.0.0), and its IR cannot express one. This step stands in for it: it reads
the LLVM IR a generator wrote (-e llvm_assembly), marks every vector store into the named buffer
`!nontemporal`, and compiles the module to an object file with llvmlite's LLVM (a newer LLVM
than Halide's reads Halide's IR).

    streaming_stores.py --buffer NAME --alignment BYTES [--prefetch-into-l2] IN.ll OUT.o

- Which stores: those whose TBAA tag names the buffer (Halide tags every store with the buffer it
  writes: `NAME`, or `NAME$<n>` when Halide renamed the Func to keep names unique, optionally
  followed by `.<refinement>`). Scalar stores stay as they are.
- Alignment: x86's movntdq faults on an unaligned address, and LLVM lowers a non-temporal store
  it cannot prove aligned to scalar movnti. The generator's streaming variants require (and check
  at run time) an output whose vector stores are all aligned to BYTES or to their own size, if
  smaller (generators/magi2_norm_generator.cpp, require_streaming_layout), so each marked store
  gets that alignment; except 16-bit lanes on AVX-512, which claim 16 bytes: with more, LLVM
  folds the 32 -> 16-bit narrowing into the store (vpmovdw to memory), which has no
  non-temporal form, and drops the hint; at 16 it narrows in registers and stores with movntdq.
- Ordering: non-temporal stores are weakly ordered, so every function that makes them issues an
  sfence before it returns (x86): a parallel task's stores are visible before the task reports
  done.
- Prefetches: Halide's prefetch directive has no cache level; its runtime asks for no temporal
  locality (prefetchnta). With --prefetch-into-l2 every read prefetch becomes one into L2
  (prefetcht1), and the module must have one: the streaming variants prefetch the next row while
  they write one, and a row that is read twice (sum, then output) and may not fit in L1 with its
  scales (D = 12288) is better kept in L2.
Fails when no store was marked, when a masked store or scatter writes the buffer (left
unmarked), when a function with marked stores has no non-temporal instruction in its compiled
code (the variant would silently have ordinary stores), or, with --prefetch-into-l2, when the
module has no prefetch to rewrite or its compiled code still prefetches with prefetchnta.
"""
import argparse
import re
import sys

import llvmlite.binding as llvm


def tbaa_tags(ir, buffer):
    """The TBAA access tags of stores into `buffer`."""
    types = set(re.findall(r'^(![0-9]+) = !\{!"%s(?:\$[0-9]+)?(?:\.[^"]*)?"' % re.escape(buffer), ir, re.M))
    return {tag for tag, base in re.findall(r'^(![0-9]+) = !\{(![0-9]+), ![0-9]+, i64 [0-9]+\}', ir, re.M)
            if base in types}


def store_bytes(vector_type):
    lanes, elem = re.fullmatch(r'<([0-9]+) x (\w+)>', vector_type).groups()
    bits = {'half': 16, 'bfloat': 16, 'float': 32, 'double': 64}.get(elem) or int(elem[1:])
    return int(lanes) * bits // 8


def mark_stores(ir, buffer, alignment):
    """Returns the rewritten module, the number of stores marked and the names of the functions
    that make them."""
    tags = tbaa_tags(ir, buffer)
    if not tags:
        return ir, 0, []
    tag_pattern = '|'.join(re.escape(t) for t in sorted(tags))
    masked = re.search(r'call [^\n]*@llvm\.masked\.(?:store|scatter)[^\n]*!tbaa (?:%s)(?=[,\n])' % tag_pattern, ir)
    if masked:
        sys.exit('streaming_stores.py: a masked store or scatter writes buffer "%s", which this step cannot mark:\n%s'
                 % (buffer, masked.group(0)))
    avx512 = re.search(r'"target-features"="[^"]*\+avx512f', ir) is not None
    store = re.compile(r'(store (<[0-9]+ x \w+>) [^\n]*?, align )([0-9]+)(, !tbaa (%s))(?=[,\n])' % tag_pattern)
    # The marker node takes the next free metadata number.
    node = max(int(n) for n in re.findall(r'^!([0-9]+) = ', ir, re.M)) + 1
    count = 0

    def nontemporal(m):
        nonlocal count
        count += 1
        size = store_bytes(m.group(2))
        claimed = min(alignment, size & -size)
        if avx512 and re.fullmatch(r'<[0-9]+ x (?:i16|half|bfloat)>', m.group(2)):
            claimed = min(claimed, 16)
        return '%s%d%s, !nontemporal !%d' % (m.group(1), claimed, m.group(4), node)

    functions = re.split(r'(?m)^(?=define )', ir)
    marked = []
    for i, f in enumerate(functions):
        before = count
        f = store.sub(nontemporal, f)
        if f.startswith('define ') and count > before:
            f = re.sub(r'(?m)^(\s+)ret ', r'\1call void @llvm.x86.sse.sfence()\n\1ret ', f)
            marked.append(re.match(r'define [^@]*@"?([^"(]+)"?\(', f).group(1))
        functions[i] = f
    return ''.join(functions) + '\n!%d = !{i32 1}\ndeclare void @llvm.x86.sse.sfence()\n' % node, count, marked


def prefetch_into_l2(ir):
    """Returns the module with every read prefetch of data asking for L2 (locality 2: prefetcht1
    on x86) and the number rewritten."""
    return re.subn(r'(call void @llvm\.prefetch\.p0\(ptr [^,]+, i32 0, i32 )[0-3](, i32 1\))', r'\g<1>2\2', ir)


def functions_without_nontemporal(assembly, names):
    """Those of `names` whose compiled code has no non-temporal store (movnt*)."""
    missing = []
    for name in names:
        body = re.search(r'(?ms)^"?%s"?:\n(.*?)^\.Lfunc_end' % re.escape(name), assembly)
        if body is None or not re.search(r'\bv?movnt', body.group(1)):
            missing.append(name)
    return missing


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--buffer', required=True, help='the output buffer (its Func name)')
    parser.add_argument('--alignment', type=int, required=True, help='bytes every vector store is aligned to')
    parser.add_argument('--prefetch-into-l2', action='store_true', help='make every read prefetch one into L2')
    parser.add_argument('input', help='LLVM IR from the generator (.ll)')
    parser.add_argument('output', help='object file to write')
    args = parser.parse_args()

    ir, count, marked = mark_stores(open(args.input).read(), args.buffer, args.alignment)
    if count == 0:
        sys.exit('streaming_stores.py: no vector store into buffer "%s" in %s' % (args.buffer, args.input))
    if args.prefetch_into_l2:
        ir, prefetches = prefetch_into_l2(ir)
        if prefetches == 0:
            sys.exit('streaming_stores.py: --prefetch-into-l2: no read prefetch in %s' % args.input)

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(ir)
    module.verify()
    # As Halide compiles its objects: position-independent, small code model, full optimization
    # (the IR is already optimized; this sets the code generator's level). The CPU and its
    # features come from each function's attributes.
    machine = llvm.Target.from_triple(module.triple).create_target_machine(opt=3, reloc='pic', codemodel='small')
    # LLVM may drop the hint when it folds other work into a store: check the code it made.
    assembly = machine.emit_assembly(module)
    missing = functions_without_nontemporal(assembly, marked)
    if missing:
        sys.exit('streaming_stores.py: %s: no non-temporal store left in %s' % (args.input, ', '.join(missing)))
    if args.prefetch_into_l2 and (re.search(r'\bprefetchnta\b', assembly) or not re.search(r'\bprefetcht1\b', assembly)):
        sys.exit('streaming_stores.py: %s: the compiled code does not prefetch into L2' % args.input)
    with open(args.output, 'wb') as f:
        f.write(machine.emit_object(module))


if __name__ == '__main__':
    main()
