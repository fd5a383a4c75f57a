#!/usr/bin/env python3
"""The steps Halide 21 has no directive for, made on the LLVM IR a generator wrote
(-e llvm_assembly), which is then compiled to an object file with llvmlite's LLVM (a newer LLVM
than Halide's reads Halide's IR): streaming (non-temporal) stores of one output buffer, its
prefetches into L2, and the native BF16 encoding of AVX-512 BF16 machines.

    ir_steps.py [--buffer NAME --alignment BYTES] [--prefetch-into-l2] [--native-bf16] IN.ll OUT.o

Streaming stores (--buffer, --alignment; upstream Halide added Func::stream_stores() after 21.0.0):
- Which stores: those whose TBAA tag names the buffer (Halide tags every store with the buffer it
  writes: `NAME`, or `NAME$<n>` when Halide renamed the Func to keep names unique, optionally
  followed by `.<refinement>`). Scalar stores stay as they are.
- Alignment: x86's movntdq faults on an unaligned address, and LLVM lowers a non-temporal store
  it cannot prove aligned to scalar movnti. The generator's streaming variants require (and check
  at run time) an output whose vector stores are all aligned to BYTES or to their own size, if
  smaller (generators/magi2_norm_generator.cpp, require_streaming_layout), so each marked store
  gets that alignment; except 16-bit lanes on AVX-512, whose stores wider than 16 bytes are
  split into 16-byte pieces here: LLVM folds the 32 -> 16-bit narrowing into a wider store
  (vpmovdw to memory), which has no non-temporal form, and drops the hint; a 16-byte-aligned
  wider store it narrows through the stack (vpmovdw to memory, then a reload a piece); pieces it
  narrows in registers and stores with movntdq. With --native-bf16 the conversion narrows in
  registers, so those stores keep their width and claim the alignment too.
- Ordering: non-temporal stores are weakly ordered, so every function that makes them issues an
  sfence before it returns (x86): a parallel task's stores are visible before the task reports
  done.
Prefetches (--prefetch-into-l2): Halide's prefetch directive has no cache level; its runtime asks
for no temporal locality (prefetchnta). Every read prefetch becomes one into L2 (prefetcht1), and
the module must have one: the streaming variants prefetch the next row while they write one, and
a row that is read twice (sum, then output) and may not fit in L1 with its scales (D = 12288) is
better kept in L2.
Native BF16 (--native-bf16): the generator's native_bf16 variants encode each BF16 output as a
pure extern call, magi2norm_bf16_rne (no NaN test: BF16 inputs) or magi2norm_bf16_rne_nan (NaN
becomes 0xffff), which Halide scalarizes: per lane an extractelement, the call and an
insertelement. Each such chain of 16 or 32 lanes becomes one call of a vector encoder, inlined:
vcvtne2ps2bf16 / vcvtneps2bf16 (round to nearest even), whose exceptions (FP32 subnormal inputs
read as zero, NaN payloads of its own) are found by vfpclassps and recomputed, only when a vector
has one, by the generators' integer rounding (generators/float_codecs.h, f32_to_bf16): the same
bits. Scalar calls (loop tails) get that integer rounding inline.
Fails when no store was marked, when a masked store or scatter writes the buffer (left
unmarked), when a function with marked stores has no non-temporal instruction in its compiled
code (the variant would silently have ordinary stores); with --prefetch-into-l2, when the
module has no prefetch to rewrite or its compiled code still prefetches with prefetchnta; with
--native-bf16, when the module has no encoder call, a chain it cannot read, or compiled code
without vcvtne2ps2bf16 / vcvtneps2bf16.
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


def free_metadata_node(ir):
    """The next metadata number the module does not use."""
    return max([int(n) for n in re.findall(r'^!([0-9]+) = ', ir, re.M)] + [0]) + 1


def mark_stores(ir, buffer, alignment, narrowed_in_registers):
    """Returns the rewritten module, the number of stores marked and the names of the functions
    that make them. `narrowed_in_registers`: 16-bit lanes come from a conversion that narrows
    them itself (--native-bf16), so no narrowing can fold into their stores."""
    tags = tbaa_tags(ir, buffer)
    if not tags:
        return ir, 0, []
    tag_pattern = '|'.join(re.escape(t) for t in sorted(tags))
    masked = re.search(r'call [^\n]*@llvm\.masked\.(?:store|scatter)[^\n]*!tbaa (?:%s)(?=[,\n])' % tag_pattern, ir)
    if masked:
        sys.exit('ir_steps.py: a masked store or scatter writes buffer "%s", which this step cannot mark:\n%s'
                 % (buffer, masked.group(0)))
    avx512 = re.search(r'"target-features"="[^"]*\+avx512f', ir) is not None
    store = re.compile(r'(store (<[0-9]+ x \w+>) [^\n]*?, align )([0-9]+)(, !tbaa (%s))(?=[,\n])' % tag_pattern)
    node = free_metadata_node(ir)
    count = 0

    wide_16_bit = re.compile(r'store <([0-9]+) x (i16|half|bfloat)> (%[\w.$"]+), ptr (%[\w.$"]+), align [0-9]+(, !tbaa (?:'
                             + tag_pattern + r'))(?=[,\n])')

    split = 0

    def pieces(m):
        """A store of more than 8 16-bit lanes as stores of its 8-lane pieces (marked below)."""
        nonlocal split
        lanes, elem, value, ptr, tbaa = int(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
        if lanes <= 8:
            return m.group(0)
        lines = []
        for k in range(lanes // 8):
            split += 1
            piece, at = '%%ir_steps.piece%d' % split, '%%ir_steps.at%d' % split
            lanes_of = ', '.join('i32 %d' % (8 * k + j) for j in range(8))
            lines += ['%s = shufflevector <%d x %s> %s, <%d x %s> poison, <8 x i32> <%s>' % (piece, lanes, elem, value, lanes, elem, lanes_of),
                      '%s = getelementptr i8, ptr %s, i64 %d' % (at, ptr, 16 * k),
                      'store <8 x %s> %s, ptr %s, align 2%s' % (elem, piece, at, tbaa)]
        return '\n  '.join(lines)

    def nontemporal(m):
        nonlocal count
        count += 1
        size = store_bytes(m.group(2))
        claimed = min(alignment, size & -size)
        return '%s%d%s, !nontemporal !%d' % (m.group(1), claimed, m.group(4), node)

    functions = re.split(r'(?m)^(?=define )', ir)
    marked = []
    for i, f in enumerate(functions):
        before = count
        if avx512 and not narrowed_in_registers:
            f = wide_16_bit.sub(pieces, f)
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


# The encoder calls the generator writes (generators/norm_pieces.h, encode) and whether NaN lanes
# become 0xffff.
ENCODERS = {'magi2norm_bf16_rne': False, 'magi2norm_bf16_rne_nan': True}
# vfpclassps categories: QNaN (0x01), denormal (0x20), SNaN (0x80).
SPECIAL_LANES = 0xa1


def integer_rounding(y, name, nan, lanes):
    """IR lines computing the generators' integer RNE of `y` (<lanes x float>, or float) into
    `%<name>` (<lanes x i16>, or i16)."""
    v = (lambda t: '<%d x %s>' % (lanes, t)) if lanes else (lambda t: t)
    splat = (lambda c: '<%s>' % ', '.join(['i32 %d' % c] * lanes)) if lanes else (lambda c: str(c))
    lines = ['%%%s.u = bitcast %s %s to %s' % (name, v('float'), y, v('i32')),
             '%%%s.h = lshr %s %%%s.u, %s' % (name, v('i32'), name, splat(16)),
             '%%%s.l = and %s %%%s.h, %s' % (name, v('i32'), name, splat(1)),
             '%%%s.b = add %s %%%s.l, %s' % (name, v('i32'), name, splat(0x7fff)),
             '%%%s.r = add %s %%%s.u, %%%s.b' % (name, v('i32'), name, name)]
    rounded = '%%%s.r' % name
    if nan:
        lines += ['%%%s.n = fcmp uno %s %s, %s' % (name, v('float'), y, y),
                  '%%%s.s = select %s %%%s.n, %s %s, %s %s' % (name, v('i1'), name, v('i32'),
                                                                splat(-1), v('i32'), rounded)]
        rounded = '%%%s.s' % name
    lines += ['%%%s.t = lshr %s %s, %s' % (name, v('i32'), rounded, splat(16)),
              '%%%s = trunc %s %%%s.t to %s' % (name, v('i32'), name, v('i16'))]
    return lines


def encoder_definitions(used, rare):
    """The scalar and vector encoders of the functions named in `used`; `rare` is the metadata
    node of the fix-up branch's weights."""
    out = []
    for fn in sorted(used):
        nan = ENCODERS[fn]
        body = integer_rounding('%y', 'r', nan, 0)
        out.append('define internal i16 @%s(float %%y) alwaysinline nounwind {\n  %s\n  ret i16 %%r\n}\n'
                   % (fn, '\n  '.join(body)))
        for lanes in (16, 32):
            native = ('%n = call <32 x bfloat> @llvm.x86.avx512bf16.cvtne2ps2bf16.512(<16 x float> %hi, <16 x float> %lo)'
                      if lanes == 32 else '%n = call <16 x bfloat> @llvm.x86.avx512bf16.cvtneps2bf16.512(<16 x float> %y)')
            args = '<16 x float> %lo, <16 x float> %hi' if lanes == 32 else '<16 x float> %y'
            iota = ', '.join('i32 %d' % i for i in range(32))
            fpclass = '@llvm.x86.avx512.fpclass.ps.512(<16 x float> %s, i32 ' + str(SPECIAL_LANES) + ')'
            if lanes == 32:
                cls = ['%c0 = call <16 x i1> ' + fpclass % '%lo',
                       '%c1 = call <16 x i1> ' + fpclass % '%hi',
                       '%c = shufflevector <16 x i1> %c0, <16 x i1> %c1, <32 x i32> <' + iota + '>',
                       '%y = shufflevector <16 x float> %lo, <16 x float> %hi, <32 x i32> <' + iota + '>']
            else:
                cls = ['%c = call <16 x i1> ' + fpclass % '%y']
            fix = integer_rounding('%y', 'f', nan, lanes)
            out.append('\n'.join([
                'define internal <%d x i16> @%s.x%d(%s) alwaysinline nounwind {' % (lanes, fn, lanes, args),
                'entry:',
                '  ' + native,
                '  %%nb = bitcast <%d x bfloat> %%n to <%d x i16>' % (lanes, lanes),
                '\n'.join('  ' + c for c in cls),
                '  %%m = bitcast <%d x i1> %%c to i%d' % (lanes, lanes),
                '  %%any = icmp ne i%d %%m, 0' % lanes,
                '  br i1 %%any, label %%fix, label %%done, !prof !%d' % rare,
                'fix:',
                '\n'.join('  ' + f for f in fix),
                '  %%z = select <%d x i1> %%c, <%d x i16> %%f, <%d x i16> %%nb' % (lanes, lanes, lanes),
                '  br label %done',
                'done:',
                '  %%e = phi <%d x i16> [ %%nb, %%entry ], [ %%z, %%fix ]' % lanes,
                '  ret <%d x i16> %%e' % lanes,
                '}', '']))
    return '\n'.join(out)


def native_bf16(ir):
    """Returns the module with every scalarized encoder chain replaced by a call of the vector
    encoder, the encoders defined, and the number of chains replaced."""
    ext = re.compile(r'^\s*(%[\w.]+) = extractelement <([0-9]+) x float> (%[\w.]+), i(?:32|64) ([0-9]+)$')
    call = re.compile(r'^\s*(%[\w.]+) = (?:tail )?call i16 @(magi2norm_bf16_rne(?:_nan)?)\(float (%[\w.]+)\)')
    ins = re.compile(r'^\s*(%[\w.]+) = insertelement <([0-9]+) x i16> (poison|undef|%[\w.]+), i16 (%[\w.]+), i(?:32|64) ([0-9]+)$')
    used = set(re.findall(r'call i16 @(magi2norm_bf16_rne(?:_nan)?)\(', ir))
    if not used:
        return ir, 0
    chains = 0
    functions = re.split(r'(?m)^(?=define )', ir)
    for fi, f in enumerate(functions):
        if not f.startswith('define ') or 'magi2norm_bf16_rne' not in f:
            continue
        lines = f.split('\n')
        exts, calls, inserts, line_of = {}, {}, {}, {}
        for i, line in enumerate(lines):
            for pattern, table in ((ext, exts), (call, calls), (ins, inserts)):
                m = pattern.match(line)
                if m:
                    table[m.group(1)] = m.groups()[1:]
                    line_of[m.group(1)] = i
        extended = {prev for _, prev, _, _ in inserts.values()}
        replacements = {}
        for last, (lanes, _, value, _) in inserts.items():
            if last in extended or value not in calls:
                continue
            chain, name = {}, last
            while name in inserts:
                _, prev, value, lane = inserts[name]
                chain[int(lane)] = value
                name = prev
            lanes = int(lanes)
            if name not in ('poison', 'undef') or sorted(chain) != list(range(lanes)) or lanes not in (16, 32):
                sys.exit('ir_steps.py: --native-bf16: an encoder chain of %d lanes it cannot read (%s)' % (lanes, last))
            if any(chain[l] not in calls for l in range(lanes)) or len({calls[chain[l]][0] for l in range(lanes)}) != 1:
                sys.exit('ir_steps.py: --native-bf16: a chain of mixed values (%s)' % last)
            fn = calls[chain[0]][0]
            halves, setup = [], []
            for g in range(lanes // 16):
                sources = [exts.get(calls[chain[16 * g + k]][1]) for k in range(16)]
                if any(s is None for s in sources) or len({(w, v) for w, v, _ in sources}) != 1:
                    sys.exit('ir_steps.py: --native-bf16: lanes %d.. of %s come from no one vector' % (16 * g, last))
                width, vector = sources[0][0], sources[0][1]
                first = int(sources[0][2])
                if [int(s[2]) for s in sources] != list(range(first, first + 16)):
                    sys.exit('ir_steps.py: --native-bf16: lanes %d.. of %s are not consecutive' % (16 * g, last))
                if width == '16':
                    halves.append(vector)
                else:
                    half = '%%nbf.%d.%d' % (chains, g)
                    setup.append('  %s = shufflevector <%s x float> %s, <%s x float> poison, <16 x i32> <%s>'
                                 % (half, width, vector, width, ', '.join('i32 %d' % i for i in range(first, first + 16))))
                    halves.append(half)
            result = '%%nbf.%d' % chains
            if lanes == 32:
                setup.append('  %s = call <32 x i16> @%s.x32(<16 x float> %s, <16 x float> %s)' % (result, fn, halves[0], halves[1]))
            else:
                setup.append('  %s = call <16 x i16> @%s.x16(<16 x float> %s)' % (result, fn, halves[0]))
            replacements[last] = (result, setup)
            chains += 1
        # The new calls go after each chain's last insertelement; later uses read them.
        for last, (result, setup) in replacements.items():
            i = line_of[last]
            use = re.compile(re.escape(last) + r'(?![\w.])')
            for j in range(i + 1, len(lines)):
                lines[j] = use.sub(result, lines[j])
            lines[i] = lines[i] + '\n' + '\n'.join(setup)
        functions[fi] = '\n'.join(lines)
    ir = ''.join(functions)
    for fn in used:
        ir = re.sub(r'(?m)^declare i16 @%s\(float\)[^\n]*$' % fn, '', ir)
    rare = free_metadata_node(ir)  # the fix-up branch's weights
    ir += '\n' + encoder_definitions(used, rare)
    ir += ('\ndeclare <32 x bfloat> @llvm.x86.avx512bf16.cvtne2ps2bf16.512(<16 x float>, <16 x float>)\n'
           'declare <16 x bfloat> @llvm.x86.avx512bf16.cvtneps2bf16.512(<16 x float>)\n'
           'declare <16 x i1> @llvm.x86.avx512.fpclass.ps.512(<16 x float>, i32)\n'
           '!%d = !{!"branch_weights", i32 1, i32 1048576}\n' % rare)
    return ir, chains


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
    parser.add_argument('--buffer', help='the output buffer (its Func name) whose stores become streaming')
    parser.add_argument('--alignment', type=int, help='bytes every vector store into --buffer is aligned to')
    parser.add_argument('--prefetch-into-l2', action='store_true', help='make every read prefetch one into L2')
    parser.add_argument('--native-bf16', action='store_true', help='encode BF16 with the AVX-512 BF16 conversion')
    parser.add_argument('input', help='LLVM IR from the generator (.ll)')
    parser.add_argument('output', help='object file to write')
    args = parser.parse_args()
    if (args.buffer is None) != (args.alignment is None):
        parser.error('--buffer and --alignment go together')
    if args.buffer is None and not args.prefetch_into_l2 and not args.native_bf16:
        parser.error('no step asked for')

    ir, marked = open(args.input).read(), []
    if args.buffer is not None:
        ir, count, marked = mark_stores(ir, args.buffer, args.alignment, args.native_bf16)
        if count == 0:
            sys.exit('ir_steps.py: no vector store into buffer "%s" in %s' % (args.buffer, args.input))
    if args.prefetch_into_l2:
        ir, prefetches = prefetch_into_l2(ir)
        if prefetches == 0:
            sys.exit('ir_steps.py: --prefetch-into-l2: no read prefetch in %s' % args.input)
    if args.native_bf16:
        ir, chains = native_bf16(ir)
        if chains == 0:
            sys.exit('ir_steps.py: --native-bf16: no vector encoder chain in %s' % args.input)

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(ir)
    module.verify()
    # As Halide compiles its objects: position-independent, small code model, full optimization
    # (the IR is already optimized; this sets the code generator's level). The CPU and its
    # features come from each function's attributes.
    machine = llvm.Target.from_triple(module.triple).create_target_machine(opt=3, reloc='pic', codemodel='small')
    if args.native_bf16:
        # The encoders inlined, the scalarized chains they replace (now dead) and the encoders'
        # own definitions removed; no other pass runs, so the rest of Halide's code is as it was.
        passes = llvm.create_new_module_pass_manager()
        passes.add_always_inliner_pass()
        passes.add_aggressive_dce_pass()
        passes.add_global_dead_code_eliminate_pass()
        passes.run(module, llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=3)))
        module.verify()
    # LLVM may drop the hint when it folds other work into a store: check the code it made.
    assembly = machine.emit_assembly(module)
    missing = functions_without_nontemporal(assembly, marked)
    if missing:
        sys.exit('ir_steps.py: %s: no non-temporal store left in %s' % (args.input, ', '.join(missing)))
    if args.prefetch_into_l2 and (re.search(r'\bprefetchnta\b', assembly) or not re.search(r'\bprefetcht1\b', assembly)):
        sys.exit('ir_steps.py: %s: the compiled code does not prefetch into L2' % args.input)
    if args.native_bf16 and (not re.search(r'\bvcvtne2?ps2bf16\b', assembly) or re.search(r'magi2norm_bf16_rne', assembly)):
        sys.exit('ir_steps.py: %s: the compiled code does not encode BF16 natively' % args.input)
    with open(args.output, 'wb') as f:
        f.write(machine.emit_object(module))


if __name__ == '__main__':
    main()
