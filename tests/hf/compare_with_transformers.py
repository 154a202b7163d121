"""The numerics tier: lrmoe's Qwen3-MoE and GLM-4.5 models against transformers' own, and
corpora tokenized with a Hugging Face tokenizer.json.

For a small random configuration of each family, both ways round:
  - transformers -> lrmoe: a model transformers builds and saves (save_pretrained, in the Hub's
    layout and in transformers 5's stacked one) is loaded by lrmoe (model.init_from);
  - lrmoe -> transformers: a model lrmoe trains for two steps on two processes with sharded
    experts is exported (lrmoe export-hf) and loaded by transformers (from_pretrained).
Each time the same tokens go through both, and the logits, the loss and every gradient of one
backward are compared, in float32 through lrmoe's dropless fixed-ownership pipeline; the LRMoE
pipeline's forward must give the same logits. bfloat16 is measured against transformers' float32
model, beside transformers' own bfloat16 model, with a bound on the loss: the two round at
different places (lrmoe keeps fp32 master weights and computes its router and norms in fp32;
transformers' Qwen3-MoE router runs in bfloat16).

Run by scripts/hf-numerics.sh (CI's "hf numerics" stage) in the environment scripts/setup.sh --hf
installs; prints a Markdown table and exits 1 when a float32 difference exceeds 1e-5 relative.
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM

FP32_BOUND = 1e-5  # relative, on the logits, the loss and every gradient
# bfloat16 keeps 8 bits of mantissa, and the two implementations round at different places: a
# token whose top-k experts are nearly tied may pick another expert, which moves its logits far.
# So in bfloat16 the loss is what is bounded, against transformers' float32 model; the logits'
# largest difference is reported, beside transformers' own bfloat16 model's.
BF16_LOSS_BOUND = 5e-3
VOCAB = 256
TOKENS_SHAPE = (2, 17)  # [batch, seq + 1]

# Small configurations that still exercise every mapped field: dense first layers, shared
# experts, partial RoPE, biases, QK-norm, scaling, untied heads.
CONFIGS = {
    "qwen3_moe": {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 96, "moe_intermediate_size": 32, "num_experts": 8,
        "num_experts_per_tok": 2, "norm_topk_prob": True, "mlp_only_layers": [0],
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "router_aux_loss_coef": 0.0,
        "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False,
    },
    "glm4_moe": {
        "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe",
        "vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 96, "moe_intermediate_size": 32, "n_routed_experts": 8,
        "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
        "norm_topk_prob": True, "routed_scaling_factor": 2.5, "n_group": 1, "topk_group": 1,
        "partial_rotary_factor": 0.5, "attention_bias": True, "use_qk_norm": True,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "hidden_act": "silu", "num_nextn_predict_layers": 0,
    },
}

EXPERIMENT = """\
[experiment]
name = "hf-numerics-{family}"
seed = 3
[model]
hf_config = "{config}"
bias_update_rate = 0.0
[data]
vocab_size = {vocab}
[train]
max_steps = 2
warmup_steps = 1
batch_size = 4
seq_len = 16
lr = 1e-2
keep_final_checkpoint = true
[cluster]
ranks = 2
memory_per_rank = "80GiB"
[policies]
bundle = "fixed"
"""

ALL = ("logits", "loss", "gradients")
EXPERT = re.compile(r"(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight")


def relative(ours, theirs):
    """The largest difference, relative to the largest magnitude of the reference."""
    ours, theirs = ours.double(), theirs.double()
    scale = theirs.abs().max().item()
    difference = (ours - theirs).abs().max().item()
    return difference / scale if scale > 0 else difference


def randomize(model, seed):
    """Weights far from transformers' initialisation (norms at one, biases and router at zero
    would hide a mapping that mixes them up), and a selection bias that changes choices."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float64)
            p.copy_(1.0 + 0.2 * noise if "norm" in name else 0.08 * noise)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.05 * torch.randn(b.shape, generator=generator, dtype=torch.float64))


def reference(model, tokens):
    """transformers' logits, loss and gradients (Hub names) of one forward and backward."""
    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=tokens[:, :-1]).logits
    loss = torch.nn.functional.cross_entropy(
        logits.float().reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
    loss.backward()
    return logits.detach().float(), loss.detach().float(), dict(model.named_parameters())


def reference_gradient(parameters, name):
    """The gradient transformers holds for a Hub name: its own, or an expert's block of the
    stacked tensor transformers 5 computes with."""
    if name in parameters:
        p = parameters[name]
    else:
        layer, expert, projection = EXPERT.match(name).groups()
        expert = int(expert)
        if projection == "down":
            p = parameters[layer + ".down_proj"]
            return grad_or_zero(p)[expert]
        p = parameters[layer + ".gate_up_proj"]
        stacked = grad_or_zero(p)[expert]
        half = stacked.shape[0] // 2
        return stacked[:half] if projection == "gate" else stacked[half:]
    return grad_or_zero(p)


def grad_or_zero(p):
    return p.grad if p.grad is not None else torch.zeros_like(p)


class Lrmoe:
    def __init__(self, binary, work):
        self.binary, self.work = binary, work

    def run(self, *args):
        done = subprocess.run([self.binary, *args], cwd=self.work, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"lrmoe {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done.stdout

    def compute(self, experiment, tokens, out, *overrides):
        out.mkdir(parents=True, exist_ok=True)
        sets = [a for o in overrides for a in ("--set", o)]
        self.run("hf-compute", str(experiment), "--tokens", str(tokens), "--out", str(out), *sets)
        outputs = load_file(str(out / "outputs.safetensors"))
        return outputs["logits"], outputs["loss"][0], load_file(str(out / "gradients.safetensors"))


def compare(rows, family, direction, precision, ours, theirs, bound, checked):
    """A row of the table: `ours` against `theirs`; `checked` names the figures `bound` holds."""
    logits, loss, gradients = ours
    ref_logits, ref_loss, parameters = theirs
    row = {"family": family, "direction": direction, "precision": precision,
           "logits": relative(logits, ref_logits),
           "loss": abs(loss.item() - ref_loss.item()) / abs(ref_loss.item()),
           "gradients": None, "worst": "", "bound": bound, "checked": checked}
    if gradients is not None:
        worst = max(gradients, key=lambda n: relative(gradients[n],
                                                      reference_gradient(parameters, n)))
        row["gradients"] = relative(gradients[worst], reference_gradient(parameters, worst))
        row["worst"] = worst
        if len(gradients) != sum(1 for _ in hub_names(parameters)):
            sys.exit(f"{family} {direction}: lrmoe gave {len(gradients)} gradients, transformers "
                     f"has {sum(1 for _ in hub_names(parameters))} tensors")
    rows.append(row)


def hub_names(parameters):
    """The Hub names of transformers' parameters (stacked experts counted per expert and
    projection)."""
    for name, p in parameters.items():
        if name.endswith("gate_up_proj"):
            for e in range(p.shape[0]):
                yield f"{name[:-len('gate_up_proj')]}{e}.gate_proj.weight"
                yield f"{name[:-len('gate_up_proj')]}{e}.up_proj.weight"
        elif name.endswith("experts.down_proj"):
            for e in range(p.shape[0]):
                yield f"{name[:-len('down_proj')]}{e}.down_proj.weight"
        else:
            yield name


def check_family(family, lrmoe, work, rows):
    folder = work / family
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIGS[family], indent=2))
    experiment = folder / "experiment.toml"
    experiment.write_text(EXPERIMENT.format(family=family, config=folder / "config.json",
                                            vocab=VOCAB))
    tokens = folder / "tokens.safetensors"
    save_file({"tokens": torch.randint(0, VOCAB, TOKENS_SHAPE,
                                       generator=torch.Generator().manual_seed(11))}, str(tokens))
    tokens_tensor = load_file(str(tokens))["tokens"]

    # transformers -> lrmoe.
    config = AutoConfig.from_pretrained(folder)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                             dtype=torch.float32)
    randomize(model, seed=5)
    model.save_pretrained(folder / "saved-hub")
    model.save_pretrained(folder / "saved-stacked", save_original_format=False)
    theirs = reference(model, tokens_tensor)
    fixed = lrmoe.compute(experiment, tokens, folder / "from-hub",
                          f"model.init_from={folder / 'saved-hub'}")
    compare(rows, family, "transformers -> lrmoe (Hub layout)", "float32", fixed, theirs,
            FP32_BOUND, ALL)
    stacked = lrmoe.compute(experiment, tokens, folder / "from-stacked",
                            f"model.init_from={folder / 'saved-stacked'}")
    if not torch.equal(stacked[0], fixed[0]):
        sys.exit(f"{family}: the stacked layout loads other weights than the Hub layout")
    lrmoe_pipeline = lrmoe.compute(experiment, tokens, folder / "lrmoe-pipeline",
                                   f"model.init_from={folder / 'saved-hub'}",
                                   "policies.bundle=lrmoe")
    compare(rows, family, "LRMoE pipeline's forward vs transformers", "float32",
            (lrmoe_pipeline[0], lrmoe_pipeline[1], None), theirs, FP32_BOUND, ALL)
    compare(rows, family, "LRMoE pipeline's forward vs lrmoe's fixed ownership", "float32",
            (lrmoe_pipeline[0], lrmoe_pipeline[1], None), (fixed[0], fixed[1], None), FP32_BOUND,
            ALL)
    bf16 = lrmoe.compute(experiment, tokens, folder / "from-hub-bf16",
                         f"model.init_from={folder / 'saved-hub'}", "train.precision=bf16")
    compare(rows, family, "lrmoe bf16 vs transformers fp32", "bfloat16",
            (bf16[0], bf16[1], None), theirs, BF16_LOSS_BOUND, ("loss",))
    theirs_bf16 = reference(model.to(torch.bfloat16), tokens_tensor)
    compare(rows, family, "transformers bf16 vs transformers fp32 (context)", "bfloat16",
            (theirs_bf16[0], theirs_bf16[1], None), theirs, BF16_LOSS_BOUND, ())

    # lrmoe -> transformers: trained on two processes, each holding half the experts.
    database = folder / "runs.db"
    lrmoe.run("launch", "-n", "2", str(experiment), "--db", str(database),
              "--set", "cluster.expert_state=sharded")
    exported = folder / "exported"
    lrmoe.run("export-hf", "1", str(exported), "--db", str(database))
    loaded, info = AutoModelForCausalLM.from_pretrained(
        exported, attn_implementation="eager", dtype=torch.float32, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        sys.exit(f"{family}: transformers loaded lrmoe's export with {problems}")
    theirs = reference(loaded, tokens_tensor)
    ours = lrmoe.compute(experiment, tokens, folder / "from-export",
                         f"model.init_from={exported}")
    compare(rows, family, "lrmoe -> transformers (export-hf)", "float32", ours, theirs,
            FP32_BOUND, ALL)


TOKENS_EXPERIMENT = """\
[experiment]
name = "hf-tokenizer"
[model]
preset = "tiny-moe"
[data]
kind = "tokens"
path = "{tokens}"
vocab_size = {vocab}
tokenizer = "{tokenizer}"
[train]
max_steps = 2
warmup_steps = 1
batch_size = 2
seq_len = 16
"""


def check_tokenizer(lrmoe, work, source_root):
    """A corpus tokenized with a tokenizer.json (scripts/corpus/tokenize_corpus.py) trains, and
    the run records the tokenizer's SHA-256; a run naming another tokenizer is refused."""
    import hashlib
    import sqlite3

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    folder = work / "tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(f"line {i}: the experts route tokens by capacity, {i * 7 % 13} of them."
                      for i in range(400)) + "\n"
    (folder / "corpus.txt").write_text(text)
    made = []
    for vocab in (300, 320):
        tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel()
        tokenizer.train_from_iterator(text.split("\n"), trainers.BpeTrainer(
            vocab_size=vocab, special_tokens=["[UNK]"], show_progress=False))
        path = work / f"tokenizer-{vocab}.json"
        tokenizer.save(str(path))
        made.append(path)
    subprocess.run([sys.executable, str(source_root / "scripts/corpus/tokenize_corpus.py"),
                    str(folder / "corpus.txt"), str(folder), "--name", "test",
                    "--tokenizer-json", str(made[0])], check=True, capture_output=True)
    manifest = (folder / "tokens.bin.toml").read_text()
    vocab = int(re.search(r"vocab_size = (\d+)", manifest).group(1))
    experiment = folder / "experiment.toml"
    experiment.write_text(TOKENS_EXPERIMENT.format(tokens=folder / "tokens.bin", vocab=vocab,
                                                   tokenizer=folder / "tokenizer.json"))
    database = folder / "runs.db"
    lrmoe.run("run", str(experiment), "--db", str(database))
    recorded = sqlite3.connect(database).execute(
        "SELECT tokenizer, tokenizer_sha256 FROM run_data").fetchone()
    digest = hashlib.sha256(made[0].read_bytes()).hexdigest()
    if recorded[1] != digest:
        sys.exit(f"tokenizer: the run recorded {recorded}, the tokenizer's SHA-256 is {digest}")
    refused = subprocess.run([lrmoe.binary, "run", str(experiment), "--db", str(database),
                              "--set", f"data.tokenizer={made[1]}"],
                             cwd=lrmoe.work, capture_output=True, text=True)
    if refused.returncode != 1 or "is not the tokenizer the tokens were made with" not in \
            refused.stderr:
        sys.exit(f"tokenizer: a run naming another tokenizer was not refused:\n{refused.stderr}")
    print(f"tokenizer: {vocab} tokens ({recorded[0]}); the run recorded SHA-256 "
          f"{digest[:12]}; a run naming another tokenizer.json was refused")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lrmoe", required=True, help="the lrmoe binary")
    parser.add_argument("--work", required=True, help="a folder to work in")
    parser.add_argument("--report", help="also write the table to this Markdown file")
    args = parser.parse_args()
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    rows = []
    lrmoe = Lrmoe(str(Path(args.lrmoe).resolve()), work)
    for family in CONFIGS:
        check_family(family, lrmoe, work, rows)
    check_tokenizer(lrmoe, work, Path(__file__).resolve().parents[2])

    def number(x):
        return "-" if x is None else f"{x:.2e}"

    lines = ["| family | compared | precision | logits | loss | gradients (worst tensor) | "
             "bound (on) | within |", "|---|---|---|---|---|---|---|---|"]
    failed = False
    for r in rows:
        bounded = [r[k] for k in r["checked"] if r[k] is not None]
        within = all(v <= r["bound"] for v in bounded)
        failed |= not within
        gradients = number(r["gradients"]) + (f" ({r['worst']})" if r["worst"] else "")
        bound = f"{r['bound']:.0e} ({', '.join(r['checked'])})" if r["checked"] else "-"
        verdict = ("yes" if within else "NO") if r["checked"] else "-"
        lines.append(f"| {r['family']} | {r['direction']} | {r['precision']} | "
                     f"{number(r['logits'])} | {number(r['loss'])} | {gradients} | "
                     f"{bound} | {verdict} |")
    table = "\n".join(lines)
    print("Largest differences, relative to the largest magnitude of transformers' value "
          f"(torch {torch.__version__}, transformers {__import__('transformers').__version__}):")
    print(table)
    if args.report:
        Path(args.report).write_text(table + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
