#!/usr/bin/env python3
"""The generator's outputs, cached for every build folder that names the same cache.

    generator_cache.py CACHE_DIR SOURCES_KEY COMMAND [ARGS...]

CMake prepends the first three words to every custom command of the folder that makes the
variants (RULE_LAUNCH_CUSTOM, when MAGI2NORM_GENERATOR_CACHE names CACHE_DIR). A run of the
generator (a program named magi2norm.generator, writing into `-o DIR`) is looked up under a key
made of SOURCES_KEY and its arguments (all but the program's path and DIR): on a hit the files a
run with those arguments wrote are copied into DIR and nothing runs; on a miss the generator
runs in a fresh folder, writing into it (`-o .`, as the build runs it: Halide names a header's
include guard after the path it writes), and its files are stored under the key, then copied
into DIR. Every other command runs as it is.

What a run writes depends on nothing else: SOURCES_KEY is the configure's hash of the
generator's sources (generators/, schedules/), the CMake that names its arguments and Halide's
version, and the configure runs again whenever one of those files changes; the arguments name
the variant, its Halide targets and features and its parameters. Not the C++ compiler that built
the generator, nor its flags: the sanitizer builds' variants are the plain build's, as they would
be anyway (cmake/Magi2normSanitize.cmake). A cache folder may be deleted at any time.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

GENERATOR = 'magi2norm.generator'


def output_dir(args):
    """The index of the `-o` value in args, or None."""
    for i, a in enumerate(args[:-1]):
        if a == '-o':
            return i + 1
    return None


def copy_files(src, dst):
    # copyfile, not copy2: the copies get a new modification time, so the build tool sees outputs
    # newer than their inputs.
    for name in os.listdir(src):
        shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))


def main(argv):
    if len(argv) < 4:
        sys.exit('usage: generator_cache.py CACHE_DIR SOURCES_KEY COMMAND [ARGS...]')
    cache_dir, sources_key, command = argv[1], argv[2], argv[3:]
    out = output_dir(command)
    if os.path.basename(command[0]) != GENERATOR or out is None:
        os.execvp(command[0], command)
    key_words = [sources_key] + command[1:out] + command[out + 1:]
    key = hashlib.sha256('\0'.join(key_words).encode()).hexdigest()
    entry = os.path.join(cache_dir, key[:2], key)
    if not os.path.isdir(entry):
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        fresh = tempfile.mkdtemp(prefix='.run-', dir=os.path.dirname(entry))
        run = [os.path.abspath(command[0])] + command[1:out] + ['.'] + command[out + 1:]
        try:
            status = subprocess.run(run, cwd=fresh).returncode
            if status != 0:
                return status if status > 0 else 128 - status  # killed by signal -status
            # Another build may have stored the same key meanwhile: its files are these.
            try:
                os.rename(fresh, entry)
            except OSError:
                if not os.path.isdir(entry):
                    raise
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
    copy_files(entry, command[out])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
