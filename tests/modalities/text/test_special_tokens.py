"""The roles of a tokenizer's special tokens: those it declares (a tokenizer.json's template and
special tokens, SentencePiece's ids and user-defined pieces), those the user names at convert
(--special-tokens), what the manifest records, and the ids build() adds, said in describe()."""

import functools
import io
import json

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import ConfigError, ManifestError
from tfpipe.format.manifest_text import TokenizerInfo
from tfpipe.modalities.text.convert import specialtokens, tokenizers

from support.records import nothing_written, records
from support.text_data import convert, docs, trained

L = 128


def respelled(names, prefix_space=False, post_processor=None):
    """The session's byte-level BPE (<pad> <s> </s> <mask>) with its special tokens spelled
    otherwise (`names`: old -> new), its post-processor replaced, as a TokenizerFile."""
    spec = json.loads(trained("bpe").data)
    text = json.dumps(spec)
    for old, new in names.items():
        text = text.replace(json.dumps(old), json.dumps(new))
    spec = json.loads(text)
    spec["post_processor"] = post_processor
    spec["pre_tokenizer"]["add_prefix_space"] = prefix_space
    return tokenizers.TokenizerFile("huggingface", json.dumps(spec).encode())


def written(tmp_path, file, name="tokenizer.json"):
    path = tmp_path / name
    path.write_bytes(file.data)
    return str(path)


def corpus(tmp_path, texts):
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return src


BOS_EOS = {"<s>": "[BOS]", "</s>": "[EOS]"}


def test_bos_and_eos_spelled_in_brackets_are_read_by_name():
    tok = tokenizers.load(respelled(BOS_EOS))
    assert tok.special_ids == {"pad": 0, "bos": 1, "eos": 2, "mask": 3}
    assert tok.roles.sources["eos"] == specialtokens.BY_NAME


def test_a_template_post_processor_declares_the_framing():
    """Llama's template puts a BOS before a sequence; BERT's and RoBERTa's frame it."""

    def template(*items):
        tokens = [t for t in items if t != "$A"]
        return {
            "type": "TemplateProcessing",
            "single": [
                {"Sequence": {"id": "A", "type_id": 0}}
                if t == "$A"
                else {"SpecialToken": {"id": t, "type_id": 0}}
                for t in items
            ],
            "pair": [],
            "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]} for i, t in enumerate(tokens, 1)},
        }

    framed = tokenizers.load(respelled(BOS_EOS, post_processor=template("[BOS]", "$A", "[EOS]")))
    assert framed.special_ids == {"pad": 0, "bos": 1, "eos": 2, "cls": 1, "sep": 2, "mask": 3}
    assert framed.roles.sources["cls"] == specialtokens.POST_PROCESSOR
    llama = tokenizers.load(respelled({"<s>": "<|x|>"}, post_processor=template("<|x|>", "$A")))
    assert llama.roles.ids["bos"] == 1 and llama.roles.sources["bos"] == specialtokens.POST_PROCESSOR


@functools.lru_cache(maxsize=1)
def spm_user_defined():
    """A SentencePiece model with <sep> and <cls> user-defined (read in text as themselves)."""
    spm = pytest.importorskip("sentencepiece")
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([line for d in docs() for line in d.splitlines() if line.strip()]),
        model_writer=out,
        vocab_size=700,
        user_defined_symbols=["<sep>", "<cls>"],
        minloglevel=2,
    )
    return tokenizers.TokenizerFile("sentencepiece", out.getvalue())


def test_sentencepiece_roles_from_its_ids_and_user_defined_pieces_and_a_literal_sep_is_noted(tmp_path):
    tok = tokenizers.load(spm_user_defined())
    assert tok.special_ids == {"unk": 0, "bos": 1, "eos": 2, "cls": 4, "sep": 3}
    assert (
        tok.roles.sources["bos"] == specialtokens.MODEL and tok.roles.sources["sep"] == specialtokens.BY_NAME
    )
    texts = [*docs()[:5], "question <sep> answer"]
    code, _, err = convert(
        corpus(tmp_path, texts),
        tmp_path / "out",
        "--tokenizer",
        written(tmp_path, spm_user_defined(), "t.model"),
    )
    assert code == 0, err
    recs, m = records(tmp_path / "out")
    assert 3 in recs[5]["tokens"]
    notes = " ".join(m.splits["train"].notes)
    assert "1 document(s) spell a special token" in notes and "c.jsonl: line 6" in notes


def test_the_byte_level_prefix_space_is_a_known_normalisation(tmp_path):
    """ByteLevel(add_prefix_space=True), the pre-tokenizer's default, decodes " text"."""
    file = respelled({}, prefix_space=True)
    tok = tokenizers.load(file)
    assert tok.decode(tok.encode([docs()[0]])[0]) == " " + docs()[0]
    code, _, err = convert(
        corpus(tmp_path, docs()[:40]), tmp_path / "out", "--tokenizer", written(tmp_path, file)
    )
    assert code == 0, err
    _, m = records(tmp_path / "out")
    assert not [n for n in m.splits["train"].notes if "ROUND TRIP" in n]
    assert "add_prefix_space" in m.tokenizer.normalization


def test_the_manifest_says_each_role_where_it_came_from_and_what_build_adds(tmp_path):
    code, _, err = convert(
        corpus(tmp_path, docs()[:9]), tmp_path / "out", "--tokenizer", written(tmp_path, respelled(BOS_EOS))
    )
    assert code == 0, err
    info = json.loads((tmp_path / "out" / "tfpipe.json").read_text())["tokenizer"]
    assert info["version"] == 2
    assert info["special_tokens"] == {"pad": "<pad>", "bos": "[BOS]", "eos": "[EOS]", "mask": "<mask>"}
    assert info["roles_from"]["eos"] == "a special token's name"
    assert info["pipeline_adds"] == {"eos": 2, "cls": 1, "sep": 2}  # RoBERTa's framing: BOS, EOS


def test_a_causal_lm_ends_documents_with_an_eos_spelled_eos(tmp_path):
    """[EOS] was not a name the roles knew: the causal LM packed documents with no separator."""
    texts = docs()[:9]
    assert (
        convert(
            corpus(tmp_path, texts), tmp_path / "out", "--tokenizer", written(tmp_path, respelled(BOS_EOS))
        )[0]
        == 0
    )
    pipe = tfpipe.plan(
        str(tmp_path / "out"), batch_size=8, sequence_length=L, output="causal_lm", training=False
    )
    assert "ends with the tokenizer's EOS, [EOS] (id 2, a special token's name)" in pipe.describe()
    ds = tfpipe.build(
        str(tmp_path / "out"), batch_size=8, sequence_length=L, output="causal_lm", training=False
    )
    rows = [x for x, _, _ in ds.as_numpy_iterator()]
    assert sum(int(((r["tokens"] == 2) & (r["segment_ids"] > 0)).sum()) for r in rows) == len(texts)


def test_a_causal_output_without_an_eos_is_refused_unless_eos_is_false_or_an_id(tmp_path):
    file = respelled({"<s>": "<|start|>", "</s>": "<|doc|>"})
    assert (
        convert(corpus(tmp_path, docs()[:9]), tmp_path / "out", "--tokenizer", written(tmp_path, file))[0]
        == 0
    )
    dest = str(tmp_path / "out")
    with pytest.raises(ConfigError, match=r"declares none.*eos=ID.*--special-tokens eos=TOKEN.*eos=False"):
        tfpipe.plan(dest, batch_size=8, sequence_length=L, output="causal_lm")
    assert (
        "ends with"
        not in tfpipe.plan(dest, batch_size=8, sequence_length=L, output="causal_lm", eos=False).describe()
    )
    pipe = tfpipe.plan(dest, batch_size=8, sequence_length=L, output="causal_lm", eos=2)
    assert "each document ends with token id 2 (eos=2)" in pipe.describe()


def test_eos_takes_a_token_id_and_says_what_it_takes(tmp_path):
    assert (
        convert(
            corpus(tmp_path, docs()[:9]), tmp_path / "out", "--tokenizer", written(tmp_path, respelled({}))
        )[0]
        == 0
    )
    dest = str(tmp_path / "out")
    with pytest.raises(ConfigError, match=r"eos must be True, False, None or a token id.*Received: eos=2.5"):
        tfpipe.plan(dest, batch_size=8, sequence_length=L, eos=2.5)
    with pytest.raises(ConfigError, match=r"a token id in 0\.\.599. Received: eos=600"):
        tfpipe.plan(dest, batch_size=8, sequence_length=L, eos=600)
    ds = tfpipe.build(dest, batch_size=8, sequence_length=L, eos=np.int64(3), training=False)
    rows = list(ds.as_numpy_iterator())
    assert sum(int(((r["tokens"] == 3) & (r["segment_ids"] > 0)).sum()) for r in rows) == 9


def test_special_tokens_named_at_convert(tmp_path):
    file = respelled({"<s>": "<|start|>", "</s>": "<|doc|>"})
    tok, src, dest = written(tmp_path, file), corpus(tmp_path, docs()[:9]), tmp_path / "out"
    code, _, err = convert(
        src, dest, "--tokenizer", tok, "--special-tokens", "eos=<|doc|>,cls=<|start|>,sep=<|doc|>"
    )
    assert code == 0, err
    _, m = records(dest)
    assert m.tokenizer.special_ids == {"pad": 0, "eos": 2, "cls": 1, "sep": 2, "mask": 3}
    assert (
        m.tokenizer.roles_from["eos"] == specialtokens.NAMED
        and m.tokenizer.special_tokens["eos"] == "<|doc|>"
    )
    pipe = tfpipe.plan(str(dest), batch_size=8, sequence_length=L, output="causal_lm")
    assert "<|doc|> (id 2, named at convert (--special-tokens))" in pipe.describe()
    # A later split takes the dataset's names; other names are refused.
    assert convert(src, dest, "--split", "validation")[0] == 0
    code, _, err = convert(src, dest, "--split", "test", "--special-tokens", "eos=<pad>")
    assert code == 1 and "every split uses the same" in err
    code, _, err = convert(src, tmp_path / "other", "--tokenizer", tok, "--special-tokens", "eos=[EOS]")
    assert code == 1 and nothing_written(tmp_path / "other")
    assert (
        "Received: eos='[EOS]', which it does not; its special tokens: ['<mask>', '<pad>', '<|doc|>', '<|start|>']"
        in err
    )
    code, _, err = convert(src, tmp_path / "other", "--tokenizer", tok, "--special-tokens", "eos")
    assert code == 1 and "expects ROLE=TOKEN pairs" in err


def test_special_tokens_given_twice_are_merged_and_a_role_named_twice_is_refused(tmp_path):
    """The second --special-tokens replaced the first in silence (eos=<mask> then eos=</s>: the
    manifest said eos '</s>')."""
    file = respelled({"<s>": "<|start|>", "</s>": "<|doc|>"})
    tok, src = written(tmp_path, file), corpus(tmp_path, docs()[:9])
    flags = [
        "--tokenizer",
        tok,
        "--special-tokens",
        "eos=<|doc|>",
        "--special-tokens",
        "cls=<|start|>,sep=<|doc|>",
    ]
    code, _, err = convert(src, tmp_path / "merged", *flags)
    assert code == 0, err
    _, m = records(tmp_path / "merged")
    assert {r: m.tokenizer.special_tokens[r] for r in ("eos", "cls", "sep")} == {
        "eos": "<|doc|>",
        "cls": "<|start|>",
        "sep": "<|doc|>",
    }
    twice = ["--tokenizer", tok, "--special-tokens", "eos=<mask>", "--special-tokens", "eos=<|doc|>"]
    code, _, err = convert(src, tmp_path / "twice", *twice)
    assert code == 1 and nothing_written(tmp_path / "twice")
    assert (
        "special_tokens (--special-tokens) names role 'eos' twice, in 'eos=<mask>' and in 'eos=<|doc|>': "
        "'<mask>' and '<|doc|>'. Name each role once." in err
    )


def test_roberta_style_s_and_slash_s_frame_a_classifier(tmp_path):
    """A tokenizer with <s> and </s> and no CLS or SEP (XLM-R's SentencePiece): framed as
    RoBERTa frames a sequence, and said; named CLS and SEP bind instead."""
    texts = docs()[:9]
    labelled = tmp_path / "c.jsonl"
    labelled.write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n" for i, t in enumerate(texts)))
    tok = written(tmp_path, trained("sentencepiece"), "t.model")  # <unk> <s> </s> <pad> <cls> <sep> <mask>
    spm = tokenizers.load(trained("sentencepiece"))
    assert {r: spm.special_ids[r] for r in ("bos", "eos", "cls", "sep")} == {
        "bos": 1,
        "eos": 2,
        "cls": 4,
        "sep": 5,
    }
    file = respelled({}, post_processor=None)  # <s> and </s> by name, no post-processor
    assert (
        convert(labelled, tmp_path / "out", "--tokenizer", written(tmp_path, file), "--label", "label")[0]
        == 0
    )
    pipe = tfpipe.plan(str(tmp_path / "out"), batch_size=8, sequence_length=L, truncate=True)
    assert "framed as BOS tokens EOS, <s> (id 1, a special token's name) and </s> (id 2" in pipe.describe()
    code, _, err = convert(
        labelled,
        tmp_path / "named",
        "--tokenizer",
        tok,
        "--label",
        "label",
        "--special-tokens",
        "cls=<s>,sep=</s>",
    )
    assert code == 0, err
    pipe = tfpipe.plan(str(tmp_path / "named"), batch_size=8, sequence_length=L, truncate=True)
    assert "framed as CLS tokens SEP: <s> (id 1, named at convert" in pipe.describe()


def test_a_classifier_without_any_framing_is_refused_with_the_way_to_name_it(tmp_path):
    texts = docs()[:9]
    labelled = tmp_path / "c.jsonl"
    labelled.write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n" for i, t in enumerate(texts)))
    file = respelled({"<s>": "<|start|>", "</s>": "<|doc|>"})
    assert (
        convert(labelled, tmp_path / "out", "--tokenizer", written(tmp_path, file), "--label", "label")[0]
        == 0
    )
    with pytest.raises(
        ConfigError,
        match=r"declares neither CLS and SEP nor BOS and EOS.*--special-tokens cls=TOKEN,sep=TOKEN",
    ):
        tfpipe.plan(str(tmp_path / "out"), batch_size=8, sequence_length=L, truncate=True)


def test_a_manifest_tokenizer_entry_of_version_1_reads_as_before():
    old = {
        "kind": "huggingface",
        "file": "tokenizer.json",
        "fingerprint": "sha256:0",
        "vocab_size": 600,
        "special_ids": {"pad": 0, "bos": 1, "eos": 2},
        "normalization": "none",
    }
    info = TokenizerInfo.from_json(old)
    assert info.version == 1 and info.pipeline_adds == {"eos": 2} and info.special_tokens == {}
    assert info.to_json() == old  # written back as it was
    assert (
        TokenizerInfo.from_json(
            TokenizerInfo.from_json(old | {"version": 2, "pipeline_adds": {"eos": 2}}).to_json()
        ).version
        == 2
    )
    with pytest.raises(ManifestError, match="expected version 1 or 2"):
        TokenizerInfo.from_json(old | {"version": 3, "pipeline_adds": {}})
