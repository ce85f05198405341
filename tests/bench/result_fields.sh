# result_fields.sh: helpers the benchmark scripts source to read the chapters' RESULT lines.
#   field KEY     the value of KEY=... in the RESULT line on standard input (nothing if absent)
#   median        the median of the numbers on standard input, one per line
field() { sed -n "s/^RESULT .* $1=\\([0-9.e+-]*\\).*/\\1/p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
