#!/bin/sh
# Renders every page of the book to a PNG, to look at before a change to the pages is committed:
# builds the book (make docs), then takes a screenshot of each page with headless Chromium
# (Debian's package `chromium`) into build/book-png/<page id>.png and prints their list.
#   tools/render_book.sh            # every page: front page, conventions, chapters, appendices
#   tools/render_book.sh chapter2   # only the pages named
# A page is one screenshot BOOK_PNG_WIDTH x BOOK_PNG_HEIGHT pixels (default 1100 x 14000): a
# longer page is cut at the bottom, a shorter one ends in white. Not part of the tests (slow).
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
WIDTH=${BOOK_PNG_WIDTH:-1100}
HEIGHT=${BOOK_PNG_HEIGHT:-14000}
BROWSER=${CHROMIUM:-chromium}
command -v "$BROWSER" >/dev/null || { echo "render_book: $BROWSER not found (apt-get install chromium)" >&2; exit 1; }

make docs BUILD_DIR="$BUILD_DIR" >/dev/null
html="$PWD/$BUILD_DIR/docs/html"
out="$BUILD_DIR/book-png"
mkdir -p "$out"

# Every page's id: the {#id} of its first line; the front page (mainpage) is Doxygen's index.
ids=""
for page in docs/*.md chapters/*.md chapters/*/*.md chapters/*/exercises/*/*.md; do
  [ -f "$page" ] || continue
  id=$(head -n 1 "$page" | sed -n 's/.*{#\([A-Za-z0-9_]*\)}.*/\1/p')
  [ -n "$id" ] || continue
  [ "$id" = mainpage ] && id=index
  ids="$ids $id"
done
[ $# -gt 0 ] && ids="$*"

status=0
for id in $ids; do
  if [ ! -f "$html/$id.html" ]; then
    echo "render_book: no page $html/$id.html (page ids:$ids)" >&2
    status=1
    continue
  fi
  "$BROWSER" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$WIDTH,$HEIGHT" \
    --screenshot="$PWD/$out/$id.png" "file://$html/$id.html" >/dev/null 2>&1
  echo "$out/$id.png"
done
exit $status
