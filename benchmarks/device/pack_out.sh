#!/usr/bin/env bash
# The device tool brings back at most 8 files from $OUT, none more than 2 folders down
# (the rest are listed as left out): the tenth session's first_autotune JSONs never came
# back. Run last in a device command: with more than 7 files under $OUT, every file but
# the text summaries (*.txt directly in $OUT) goes into $OUT/out.tar.xz.
set -uo pipefail
cd "$OUT" || exit 1
if [ "$(find . -type f | wc -l)" -le 7 ]; then exit 0; fi
find . -type f -printf '%P\n' | grep -v -x -e '[^/]*\.txt' -e 'out\.tar\.xz' > /tmp/pack_list
tar -cJf out.tar.xz -T /tmp/pack_list && xargs -a /tmp/pack_list rm -f
find . -mindepth 1 -type d -empty -delete
# Still over: the summaries too (the archive is one file).
if [ "$(find . -type f | wc -l)" -gt 8 ]; then
  find . -maxdepth 1 -type f -name "*.txt" -printf '%P\n' > /tmp/pack_list
  mv out.tar.xz /tmp/out_first.tar.xz
  tar -cJf out_texts.tar.xz -T /tmp/pack_list && xargs -a /tmp/pack_list rm -f
  mv /tmp/out_first.tar.xz out.tar.xz
fi
ls -la "$OUT"
