#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
#
# The layout rules of lib/ (DESIGN.md, "Layout"), checked from what the meson files declare.
# lib/meson.build calls this with, for every component in dependency order:
#   --component NAME --headers H... --indirect H... --internal H...
# where
#   headers           the component's public headers: what drivers/ofi, app/ and later
#                     components include;
#   indirect headers  included by its public headers, never directly from outside the component
#                     (DPDK's indirect_headers);
#   internal headers  private to the component's own sources (*_internal.h).
# It checks that
#   1. every header in lib/<component>/ is declared, in exactly one list;
#   2. a component includes headers only of itself and of the components before it;
#   3. nothing outside a component (other components, drivers/, app/) includes its indirect or
#      internal headers; tests (test/) may include anything.
# Prints each violation and exits 1 when there is any.
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def parse(argv):
    comps = []  # [(name, {kind: [paths]})]
    kind = None
    for a in argv:
        if a == '--component':
            comps.append([None, {'headers': [], 'indirect': [], 'internal': []}])
            kind = 'name'
        elif a in ('--headers', '--indirect', '--internal'):
            kind = a[2:]
        elif kind == 'name':
            comps[-1][0] = a
        else:
            comps[-1][1][kind].append(a)
    return comps


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lib = os.path.join(root, 'lib')
    comps = parse(sys.argv[1:])
    order = {name: i for i, (name, _) in enumerate(comps)}
    kind_of = {}  # 'component/file.h' -> (component, kind)
    errors = []
    for name, lists in comps:
        for kind, paths in lists.items():
            for p in paths:
                rel = os.path.relpath(os.path.join(root, p) if not os.path.isabs(p) else p, lib)
                if rel in kind_of:
                    errors.append(f'{rel}: declared twice ({kind_of[rel][1]} and {kind})')
                kind_of[rel] = (name, kind)
        folder = os.path.join(lib, name)
        for f in sorted(os.listdir(folder)):
            if f.endswith('.h') and f'{name}/{f}' not in kind_of:
                errors.append(f'lib/{name}/{f}: not declared in lib/{name}/meson.build '
                              '(headers, indirect_headers or internal_headers)')

    def includes(path):
        with open(path, encoding='utf-8', errors='replace') as fh:
            return INCLUDE.findall(fh.read())

    def resolve(inc, where):
        # "component/file.h", or a file of the including file's own folder.
        if inc in kind_of:
            return inc
        local = os.path.relpath(os.path.join(os.path.dirname(where), inc), lib)
        return local if local in kind_of else None

    scan = []
    for top in ('lib', 'drivers', 'app'):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            scan += [os.path.join(dirpath, f) for f in files if f.endswith(('.h', '.cc', '.c'))]
    for path in sorted(scan):
        rel_root = os.path.relpath(path, root)
        in_lib = rel_root.startswith('lib' + os.sep)
        own = rel_root.split(os.sep)[1] if in_lib else None
        for inc in includes(path):
            target = resolve(inc, path)
            if target is None:
                continue
            comp, kind = kind_of[target]
            if own == comp:
                continue
            if in_lib and own in order and order[comp] > order[own]:
                errors.append(f'{rel_root}: includes {target}, but {comp} comes after {own} '
                              '(lib/meson.build lists components in dependency order)')
            if kind != 'headers':
                errors.append(f'{rel_root}: includes {target}, an {kind} header of {comp}')
    for e in errors:
        print(e)
    print(f'check-layout: {len(scan)} files, {len(kind_of)} headers declared, '
          f'{len(errors)} problems')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
