#!/usr/bin/env python3
"""cmake/generator_cache.py against a stand-in for the generator: a program of the same name
that logs each run and writes files made from its arguments and working folder, so a test can
tell a copy from a run and see where a run wrote.

    generator_cache_test.py PATH/TO/generator_cache.py
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest

LAUNCHER = None

# Writes <name>.h (its arguments, the -o value it saw, its working folder's name) and <name>.o
# into its -o folder; logs a line a run; exits with $FAKE_STATUS.
FAKE_GENERATOR = r'''#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
out = args[args.index('-o') + 1]
name = args[args.index('-n') + 1]
with open(os.environ['FAKE_LOG'], 'a') as log:
    log.write(' '.join(args) + '\n')
status = int(os.environ.get('FAKE_STATUS', '0'))
if status == 0:
    with open(os.path.join(out, name + '.h'), 'w') as f:
        f.write('args=%s\nout=%s\ncwd=%s\n' % (' '.join(args), out, os.path.basename(os.getcwd())))
    with open(os.path.join(out, name + '.o'), 'wb') as f:
        f.write(bytes(range(256)) * 4)
sys.exit(status)
'''


class GeneratorCache(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = self.tmp.name
        self.cache = os.path.join(root, 'cache')
        self.generator = os.path.join(root, 'bin', 'magi2norm.generator')
        os.makedirs(os.path.dirname(self.generator))
        with open(self.generator, 'w') as f:
            f.write(FAKE_GENERATOR)
        os.chmod(self.generator, 0o755)
        self.log = os.path.join(root, 'runs.log')
        open(self.log, 'w').close()
        self.env = dict(os.environ, FAKE_LOG=self.log)

    def tearDown(self):
        self.tmp.cleanup()

    def build_dir(self, name):
        d = os.path.join(self.tmp.name, name)
        os.makedirs(d, exist_ok=True)
        return d

    def launch(self, build_dir, params=('in_type=bf16',), key='k1', status=0, program=None):
        command = program or [self.generator, '-n', 'v', '-g', 'magi2_norm', '-o', '.', 'target=x86-64-linux'] + list(params)
        env = dict(self.env, FAKE_STATUS=str(status))
        return subprocess.run([sys.executable, LAUNCHER, self.cache, key] + command, cwd=build_dir, env=env).returncode

    def runs(self):
        with open(self.log) as f:
            return f.read().splitlines()

    def read(self, build_dir, name):
        with open(os.path.join(build_dir, name), 'rb') as f:
            return f.read()

    def test_a_second_build_folder_gets_the_first_runs_files_without_a_run(self):
        a, b = self.build_dir('a'), self.build_dir('b')
        self.assertEqual(self.launch(a), 0)
        day_ago = time.time() - 86400
        for folder, _, files in os.walk(self.cache):
            for name in files:
                os.utime(os.path.join(folder, name), (day_ago, day_ago))
        before = time.time()
        self.assertEqual(self.launch(b), 0)
        self.assertEqual(len(self.runs()), 1)
        for name in ('v.h', 'v.o'):
            self.assertEqual(self.read(a, name), self.read(b, name))
            # Newer than the cached file (a day old): the build tool sees an up-to-date output.
            self.assertGreaterEqual(os.stat(os.path.join(b, name)).st_mtime, before - 1)
        self.assertEqual(self.read(a, 'v.o'), bytes(range(256)) * 4)

    def test_the_generator_writes_into_its_own_folder_as_dot(self):
        a = self.build_dir('a')
        self.launch(a)
        header = self.read(a, 'v.h').decode()
        self.assertIn('out=.\n', header)
        self.assertNotIn('cwd=a\n', header)  # it ran in the cache's fresh folder, not the build's

    def test_other_arguments_or_sources_run_again(self):
        a = self.build_dir('a')
        self.launch(a)
        self.launch(a, params=('in_type=f16',))
        self.assertEqual(len(self.runs()), 2)
        self.assertIn('in_type=f16', self.read(a, 'v.h').decode())
        self.launch(a, key='k2')
        self.assertEqual(len(self.runs()), 3)
        self.launch(self.build_dir('b'), params=('in_type=f16',))
        self.assertEqual(len(self.runs()), 3)

    def test_a_failed_run_fails_and_stores_nothing(self):
        a = self.build_dir('a')
        self.assertEqual(self.launch(a, status=3), 3)
        self.assertFalse(os.path.exists(os.path.join(a, 'v.h')))
        self.assertEqual(self.launch(a), 0)
        self.assertEqual(len(self.runs()), 2)
        # Nothing of the failed run is left in the cache: only the one stored entry.
        entries = [e for d in os.listdir(self.cache) for e in os.listdir(os.path.join(self.cache, d))]
        self.assertEqual(len(entries), 1)

    def test_other_commands_run_as_they_are(self):
        a = self.build_dir('a')
        self.assertEqual(self.launch(a, program=['sh', '-c', 'echo ran > out.txt; exit 5']), 5)
        self.assertEqual(self.read(a, 'out.txt'), b'ran\n')
        self.assertFalse(os.path.exists(self.cache))


if __name__ == '__main__':
    LAUNCHER = sys.argv.pop(1)
    unittest.main(verbosity=2)
