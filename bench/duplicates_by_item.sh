#!/usr/bin/env bash
# Counts the repeated code of commits' trees with the `duplicates` tool, in a way that does not
# depend on how the code is split into files.
#
#   bench/duplicates_by_item.sh REV [REV ...]
#
# `duplicates` prints one row per pair of files, with "(+N more runs)" when the two files share
# more runs than the one named, and heads its list with the number of rows. One large file that
# repeats itself is then one row however many copies it holds, and the same copies split over
# several files are several rows. So, for each REV, this prints two counts of two trees:
#   - the tree as it is (its files);
#   - the same text with every Rust file cut into one file per top-level or once-indented item
#     (fn, struct, enum, impl, mod, const, ...), so that both trees are read at the same grain.
# For each: rows (the tool's own number), runs (every pair of places that share six lines or
# more: a row and its "more runs"; runs the tool leaves out as standing in too many places
# are not counted, on either side), and those counts for the rows the tool does not mark
# "boilerplate" (the tool lists those last). Where `--most` cut rows off, the runs are a lower
# bound (one run for each row left off), marked ">=".
#
# Needs the `duplicates` command on PATH, and git. Takes seconds a tree.
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: bench/duplicates_by_item.sh REV [REV ...]" >&2
    exit 2
fi
command -v duplicates >/dev/null || {
    echo "bench/duplicates_by_item.sh: needs the \`duplicates\` command on PATH" >&2
    exit 2
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# split_items SRC DST: DST gets SRC's files; each .rs file becomes a folder of its items.
split_items() {
    local src=$1 dst=$2 f
    (cd "$src" && find . -type f) | while IFS= read -r f; do
        f=${f#./}
        mkdir -p "$dst/$(dirname "$f")"
        case "$f" in
        *.rs)
            mkdir -p "$dst/$f.d"
            awk -v d="$dst/$f.d" '
                BEGIN { k = 0; out = sprintf("%s/p%04d.rs", d, k) }
                /^(    )?((pub(\([a-z]+\))? )?(async )?(unsafe )?(fn|struct|enum|impl|const|static|mod|trait|type|macro_rules!)[ <!(]|impl|#\[)/ && !attr {
                    close(out); k++; out = sprintf("%s/p%04d.rs", d, k)
                }
                { print > out; attr = ($0 ~ /^(    )?#\[/) }' "$src/$f"
            ;;
        *) cp "$src/$f" "$dst/$f" ;;
        esac
    done
}

# count LABEL DIR: one line of counts of `duplicates` run over DIR.
count() {
    local label=$1 dir=$2 out
    out=$(duplicates --repo "$dir" --most 200 --seconds 600)
    printf '%s\n' "$out" | awk -v label="$label" '
        NR == 1 {
            rows = $1
            # "... (N by shape alone, M of those marked boilerplate)"
            if (match($0, /[0-9]+ of those marked boilerplate/)) { thin = substr($0, RSTART) + 0 }
        }
        /^D[0-9]+ / {
            m = 0
            if (match($0, /\(\+[0-9]+ more run/)) { m = substr($0, RSTART + 2) + 0 }
            runs += 1 + m
            if ($0 !~ / boilerplate/) { thick_rows++; thick_runs += 1 + m }
        }
        /^\(\+[0-9]+ more pairs?\)/ { runs += substr($0, 3) + 0; bound = ">=" }
        /^incomplete:/ { print label ": " $0 > "/dev/stderr" }
        END {
            # The tool lists boilerplate rows last: when every row it does not mark so was
            # shown, their runs are all counted.
            thick_bound = (thick_rows == rows - thin) ? "" : ">="
            printf "%-36s rows %4d  runs %2s%4d  not boilerplate: rows %3d, runs %2s%4d\n",
                label, rows, bound, runs, rows - thin, thick_bound, thick_runs
        }'
}

for rev in "$@"; do
    sha=$(git rev-parse --short "$rev^{commit}")
    whole="$scratch/$sha/whole"
    items="$scratch/$sha/items"
    mkdir -p "$whole" "$items"
    git archive "$sha" | tar -x -C "$whole"
    split_items "$whole" "$items"
    count "$rev ($sha), as files" "$whole"
    count "$rev ($sha), one file per item" "$items"
done
