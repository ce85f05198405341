#!/usr/bin/env bash
# make pdf: the book as one printable PDF: the front page, the seven chapters, the glossary and
# the cheat sheet, in reading order, each page of `make docs`'s HTML printed by headless Chromium
# (the book's stylesheet hides the sidebar and the menus in print) and joined with qpdf.
#
#   tools/make_pdf.sh HTML_DIR OUTPUT.pdf
#
# Needs Debian's chromium and qpdf (make pdf installs them). The measurement appendices, the
# exercise pages and the API reference stay in the HTML book.
set -euo pipefail

html=${1:?usage: tools/make_pdf.sh HTML_DIR OUTPUT.pdf}
output=${2:?usage: tools/make_pdf.sh HTML_DIR OUTPUT.pdf}
pages=(index chapter1 chapter2 chapter3 chapter4 chapter5 chapter6 chapter7 glossary cheatsheet)

for page in "${pages[@]}"; do
  if [[ ! -f "$html/$page.html" ]]; then
    echo "make pdf: $html/$page.html is missing: build the book first (make docs)" >&2
    exit 1
  fi
done

html=$(cd "$html" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

parts=()
for page in "${pages[@]}"; do
  echo "printing $page.html"
  # --virtual-time-budget lets the page's scripts (the table of contents, the tree view) finish.
  if ! chromium --headless=new --no-sandbox --disable-gpu --no-pdf-header-footer \
         --virtual-time-budget=5000 --print-to-pdf="$work/$page.pdf" "file://$html/$page.html" \
         > "$work/$page.log" 2>&1 || [[ ! -s "$work/$page.pdf" ]]; then
    echo "make pdf: Chromium could not print $page.html; its output:" >&2
    cat "$work/$page.log" >&2
    exit 1
  fi
  parts+=("$work/$page.pdf")
done

mkdir -p "$(dirname "$output")"
qpdf --empty --pages "${parts[@]}" -- "$output"
echo "The printable book: $output ($(qpdf --show-npages "$output") pages)"
