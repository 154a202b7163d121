#!/usr/bin/env bash
# Prepares a real-text corpus the corpus experiments train on (experiments/corpus/), from Debian 12
# packages pinned by version and SHA-256 in scripts/corpus/<corpus>.lock:
#   debian-docs-en     (the default) the English documentation prose of five packages (the Linux
#                      kernel's, Python's, PostgreSQL's, Perl's and Django's manuals, about 63 MB
#                      of text), tokenized by a SentencePiece BPE of vocabulary 8192 trained on it
#   debian-python-src  the source of CPython 3.11's standard library (about 10 MB), one id per
#                      byte (vocabulary 256)
# Writes data/<corpus>/ (or the folder given):
#   corpus.txt                        the text, as tokenized
#   tokenizer.model, tokenizer.vocab  the BPE tokenizer (tokenizer.txt for bytes: what an id is)
#   tokens.bin, tokens.bin.toml       an lrmoe `tokens` file (uint16) and its manifest, which
#                                     every run that trains on it records (Note [Data provenance])
# A few minutes on 2 cores, about 1 GB of disk while it runs and 200 MB after. Run again, it does
# nothing while tokens.bin matches its manifest.
#
#   bash scripts/prepare-corpus.sh [--corpus NAME] [FOLDER] [--tokenizer TOKENIZER.json]
#
# --tokenizer encodes the same text with a Hugging Face tokenizer.json instead (a model's own, as
# its repository ships it; copied to FOLDER/tokenizer.json), in the environment of
# scripts/setup.sh --hf; a run names it as data.tokenizer, and records its SHA-256.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C  # one sort order for the POD files, whatever the locale
corpus=debian-docs-en
out=""
tokenizer=""
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus)
      [ $# -ge 2 ] && [ -f "scripts/corpus/$2.lock" ] || { echo "prepare-corpus: --corpus needs" \
        "one of: $(cd scripts/corpus && ls ./*.lock | sed 's|./||; s|.lock$||' | tr '\n' ' ')" >&2; exit 2; }
      corpus=$2
      shift 2 ;;
    --tokenizer)
      [ $# -ge 2 ] && [ -f "$2" ] || { echo "prepare-corpus: --tokenizer needs a tokenizer.json file" >&2; exit 2; }
      tokenizer=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
      shift 2 ;;
    *) out=$1; shift ;;
  esac
done
out=${out:-data/$corpus}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # absolute: the downloads run in a folder of their own
lock=scripts/corpus/$corpus.lock
# How the text becomes ids, the lock's `tokenizer` line: `bpe N` or `bytes`.
read -r _ encoding vocab < <(grep '^tokenizer ' "$lock") || { echo "prepare-corpus: $lock has no" \
  "'tokenizer bpe N' or 'tokenizer bytes' line" >&2; exit 1; }

manifest_sha() { sed -n '/^\[tokens\]/,$ s/^sha256 = "\(.*\)"$/\1/p' "$1"; }
# What the corpus is made from: the lock and the scripts. A change to any of them makes it anew.
recipe=$(cat "$lock" scripts/corpus/html_to_text.py scripts/corpus/tokenize_corpus.py "$0" \
  ${tokenizer:+"$tokenizer"} | sha256sum | cut -d' ' -f1)
if [ -f "$out/tokens.bin.toml" ] && [ -f "$out/tokens.bin" ] &&
  [ "$(cat "$out/recipe.sha256" 2>/dev/null)" = "$recipe" ] &&
  [ "$(sha256sum "$out/tokens.bin" | cut -d' ' -f1)" = "$(manifest_sha "$out/tokens.bin.toml")" ]; then
  echo "corpus: $out/tokens.bin is ready (it matches its manifest and this recipe)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ -n "$tokenizer" ]; then bash scripts/setup.sh --corpus --hf; else bash scripts/setup.sh --corpus; fi
work="$out/build"
rm -rf "$work"
mkdir -p "$work/debs" "$work/unpacked"
: >"$work/corpus.txt"
sources=()
updated=false
while read -r spec sha how folder; do
  [[ -z "$spec" || "$spec" == \#* || "$spec" == tokenizer ]] && continue
  name=${spec%%=*}
  # The package lists may be older than the machine's set-up: refresh them once before giving up.
  until (cd "$work/debs" && apt-get download -qq "$spec" 2>"$work/apt.log"); do
    if $updated; then
      echo "corpus: cannot download $spec ($(tail -n 1 "$work/apt.log")); if Debian no longer" \
        "serves this version, put the served one and its .deb's SHA-256 in $lock (the corpus," \
        "and every figure made on it, then changes)" >&2
      exit 1
    fi
    $SUDO apt-get update -qq
    updated=true
  done
  deb=$(ls "$work/debs/${name}_"*.deb)
  if ! echo "$sha  $deb" | sha256sum --check --quiet --status; then
    echo "corpus: $deb does not have the SHA-256 $lock gives it; the corpus would not be the" \
      "recorded one" >&2
    exit 1
  fi
  dpkg-deb -x "$deb" "$work/unpacked/$name"
  echo "corpus: text of $spec"
  case $how in
    html) /usr/bin/python3 scripts/corpus/html_to_text.py "$work/unpacked/$name/$folder" ;;
    # pod2text prints what it can of a page with POD errors and exits 1: that text is kept;
    # any other failure stops the corpus.
    pod) pages=("$work/unpacked/$name/$folder"/*.pod)
      [ -f "${pages[0]}" ] || { echo "corpus: no .pod files in $folder of $spec" >&2; exit 1; }
      for page in "${pages[@]}"; do
        status=0
        pod2text --utf8 "$page" 2>/dev/null || status=$?
        [ "$status" -le 1 ] || { echo "corpus: pod2text failed on $page ($status)" >&2; exit 1; }
        echo
      done ;;
    # Every Python source under the folder in one sort order, the test suites left out: code
    # that tests code repeats it; links (the same file again) neither.
    python) find "$work/unpacked/$name/$folder" -type f -name '*.py' -not -path '*/test/*' \
        -not -path '*/tests/*' -not -path '*/idle_test/*' | sort | xargs -d '\n' cat ;;
    *) echo "corpus: $lock: '$how' for $spec is none of html, pod and python" >&2; exit 1 ;;
  esac >>"$work/corpus.txt"
  sources+=(--source "$spec")
done <"$lock"

mv "$work/corpus.txt" "$out/corpus.txt"
if [ -n "$tokenizer" ]; then
  echo "corpus: $(wc -c <"$out/corpus.txt") bytes of text; encoding with $tokenizer"
  .tools/transformers/bin/python scripts/corpus/tokenize_corpus.py "$out/corpus.txt" "$out" \
    --name "$corpus" --tokenizer-json "$tokenizer" "${sources[@]}"
elif [ "$encoding" = bytes ]; then
  echo "corpus: $(wc -c <"$out/corpus.txt") bytes of text; one id per byte"
  /usr/bin/python3 scripts/corpus/tokenize_corpus.py "$out/corpus.txt" "$out" \
    --name "$corpus" --bytes "${sources[@]}"
else
  echo "corpus: $(wc -c <"$out/corpus.txt") bytes of text; training the tokenizer and encoding"
  /usr/bin/python3 scripts/corpus/tokenize_corpus.py "$out/corpus.txt" "$out" \
    --name "$corpus" --vocab "$vocab" "${sources[@]}"
fi
rm -rf "$work"
echo "$recipe" >"$out/recipe.sha256"
cat "$out/tokens.bin.toml"
