#!/usr/bin/python3
"""Tokenizes a text corpus into an lrmoe `tokens` file, with a BPE it trains or a given tokenizer.

    tokenize_corpus.py CORPUS.txt OUT_DIR --name NAME --vocab 8192 [--source PKG=VER]...
    tokenize_corpus.py CORPUS.txt OUT_DIR --name NAME --tokenizer-json FILE [--source PKG=VER]...
    tokenize_corpus.py CORPUS.txt OUT_DIR --name NAME --bytes [--source PKG=VER]...

Writes, in OUT_DIR:
  tokenizer.model, tokenizer.vocab   the SentencePiece BPE model (Debian's python3-sentencepiece),
                                     trained on the corpus; or
  tokenizer.json                     the Hugging Face tokenizer given (a copy), run by the
                                     `tokenizers` library (scripts/setup.sh --hf); or
  tokenizer.txt                      with --bytes, what an id is (one id per byte of the text, its
                                     value), so that the manifest has a tokenizer to name and hash
  tokens.bin                         every line's ids then the end-of-line id (SentencePiece),
                                     every line with its newline encoded (tokenizer.json), or
                                     every byte (--bytes), uint16 little-endian, uint32 for
                                     vocabularies over 65536
  tokens.bin.toml                    the manifest lrmoe reads beside tokens.bin and records with
                                     every run: the corpus's name, size, SHA-256 and sources, the
                                     tokenizer's library, model and SHA-256, the tokens' count and
                                     SHA-256 (docs/notes.md, Note [Data provenance])
Training reads every line (no sampling) on one thread, so the model is a function of the text:
the same corpus gives the same bytes of tokenizer.model on every machine (the model also holds
the names of its input and output, so they are given relative to OUT_DIR, where CORPUS must be).
"""
import argparse
import array
import hashlib
import json
import os
import shutil
import sys


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def toml_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("out")
    parser.add_argument("--name", required=True)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--source", action="append", default=[])
    parser.add_argument("--tokenizer-json", help="a Hugging Face tokenizer.json to encode with")
    parser.add_argument("--bytes", action="store_true", help="one id per byte, vocabulary 256")
    args = parser.parse_args()
    if not args.tokenizer_json and not args.bytes and not 256 < args.vocab <= 65536:
        sys.exit(f"tokenize_corpus.py: --vocab {args.vocab}: must be in (256, 65536] for uint16 ids")

    corpus = os.path.relpath(args.corpus, args.out)
    if corpus.startswith(".."):
        sys.exit(f"tokenize_corpus.py: {args.corpus}: the corpus must be inside {args.out}")
    if args.tokenizer_json:
        args.tokenizer_json = os.path.abspath(args.tokenizer_json)
    os.chdir(args.out)
    if args.bytes:
        ids, dtype, tokenizer = encode_bytes(corpus)
    else:
        with open(corpus, encoding="utf-8") as stream:
            lines = stream.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the newline that ends the file ends its last line
        if args.tokenizer_json:
            ids, dtype, tokenizer = encode_with_tokenizer_json(args.tokenizer_json, lines)
        else:
            ids, dtype, tokenizer = encode_with_trained_bpe(corpus, lines, args.vocab)
    if sys.byteorder != "little":
        ids.byteswap()
    tokens = "tokens.bin"
    with open(tokens, "wb") as stream:
        ids.tofile(stream)

    manifest = [
        "# Written by scripts/prepare-corpus.sh. lrmoe reads it beside tokens.bin, checks the",
        "# tokens against it and records it with every run that trains on them.",
        "[corpus]",
        f"name = {toml_string(args.name)}",
        f"bytes = {os.path.getsize(corpus)}",
        f"sha256 = {toml_string(sha256_of(corpus))}",
        "sources = [" + ", ".join(toml_string(s) for s in args.source) + "]",
        "",
        "[tokenizer]",
        f"library = {toml_string(tokenizer['library'])}",
        f"model = {toml_string(tokenizer['model'])}",
        f"vocab_size = {tokenizer['vocab_size']}",
        f"sha256 = {toml_string(sha256_of(tokenizer['file']))}",
        "",
        "[tokens]",
        f"dtype = {toml_string(dtype)}",
        f"count = {len(ids)}",
        f"sha256 = {toml_string(sha256_of(tokens))}",
    ]
    with open(tokens + ".toml", "w", encoding="utf-8") as stream:
        stream.write("\n".join(manifest) + "\n")
    print(f"tokenize_corpus.py: {len(ids)} tokens of vocabulary {tokenizer['vocab_size']} "
          f"({os.path.getsize(corpus) / len(ids):.2f} bytes a token) in "
          f"{os.path.join(args.out, tokens)}")


def encode_bytes(corpus):
    """Every byte of the corpus as its own id (0-255), as lrmoe's `text` data reads a file, with a
    description of that mapping for the manifest to hash."""
    with open("tokenizer.txt", "w", encoding="utf-8") as stream:
        stream.write("byte-level: every byte of the text is one token, its id the byte's value "
                     "(0-255); no merges, no special tokens\n")
    with open(corpus, "rb") as stream:
        ids = array.array("H", list(stream.read()))
    return ids, "uint16", {"library": "none", "model": "bytes", "vocab_size": 256,
                           "file": "tokenizer.txt"}


def encode_with_tokenizer_json(path, lines):
    """The lines, each with its newline, encoded by a Hugging Face tokenizer (no special tokens
    added); the tokenizer copied beside the tokens."""
    import tokenizers

    shutil.copyfile(path, "tokenizer.json")
    tokenizer = tokenizers.Tokenizer.from_file("tokenizer.json")
    vocab = max(tokenizer.get_vocab(with_added_tokens=True).values()) + 1
    dtype = "uint16" if vocab <= 65536 else "uint32"
    ids = array.array("H" if dtype == "uint16" else "I")
    for encoded in tokenizer.encode_batch([line + "\n" for line in lines],
                                          add_special_tokens=False):
        ids.extend(encoded.ids)
    with open("tokenizer.json", encoding="utf-8") as stream:
        model = json.load(stream)["model"].get("type", "unknown")
    return ids, dtype, {"library": "tokenizers " + tokenizers.__version__, "model": model,
                        "vocab_size": vocab, "file": "tokenizer.json"}


def encode_with_trained_bpe(corpus, lines, vocab):
    """A SentencePiece BPE of `vocab` trained on the corpus, and the lines it encodes, each then
    the end id."""
    import sentencepiece

    prefix = "tokenizer"
    # byte_fallback: any byte is representable, so no text maps to the unknown id. Ids 0, 1, 2
    # are unknown, begin and end; the end id ends every line in tokens.bin.
    sentencepiece.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, vocab_size=vocab, model_type="bpe",
        byte_fallback=True, character_coverage=0.9995, input_sentence_size=0,
        shuffle_input_sentence=False, max_sentence_length=1 << 16, num_threads=1,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    model = sentencepiece.SentencePieceProcessor(model_file=prefix + ".model")
    ids = array.array("H")
    end = model.eos_id()
    for encoded in model.encode(lines, out_type=int, num_threads=os.cpu_count()):
        ids.extend(encoded)
        ids.append(end)
    return ids, "uint16", {"library": "sentencepiece " + sentencepiece.__version__,
                           "model": "bpe", "vocab_size": model.get_piece_size(),
                           "file": prefix + ".model"}


if __name__ == "__main__":
    main()
