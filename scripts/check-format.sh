#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# clang-format --dry-run -Werror over every C/C++ file git knows of (tracked or new).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' '*.c' '*.hpp' '*.cpp' 2>/dev/null)
if [ ${#files[@]} -eq 0 ]; then
  echo "check-format: no files"; exit 0
fi
clang-format --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files clean"
