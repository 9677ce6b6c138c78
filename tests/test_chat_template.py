"""Chat templates render exactly as transformers' `apply_chat_template` does, from a model directory's
tokenizer_config.json, a chat_template.jinja file, or GGUF metadata; the engine tokenizes them to the same ids."""

from __future__ import annotations

import json

import pytest

from engine.tokenizer import Tokenizer
from tests.helpers.checkpoints import build_tokenizer

CHATML_SMOLLM = (  # SmolLM2-135M-Instruct's template, as its GGUF stores it
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>'"
    " + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3_STYLE = (
    "{{- bos_token }}\n{%- for message in messages %}\n"
    "    {%- if message['role'] not in ['system', 'user', 'assistant'] %}{{ raise_exception('bad role') }}{% endif %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n")
WITH_TOJSON_AND_LOOPS = (
    "{% for m in messages %}{% if m.role == 'skip' %}{% continue %}{% endif %}"
    "[{{ m.role }}] {{ m.content | tojson }}\n"
    "{% if loop.index >= 3 %}{% break %}{% endif %}{% endfor %}{{ eos_token if not add_generation_prompt else '>' }}")
TEMPLATES = {"chatml": CHATML_SMOLLM, "llama3": LLAMA3_STYLE, "tojson-loops": WITH_TOJSON_AND_LOOPS}
CONVERSATIONS = [
    [{"role": "user", "content": "Extract the invoice number."}],
    [{"role": "system", "content": "You extract JSON."}, {"role": "user", "content": "Total: 1.234,50 € — «Müller»"}],
    [{"role": "user", "content": "  padded <b>html</b> & \"quotes\"  "}, {"role": "assistant", "content": "{}"},
     {"role": "skip", "content": "x"}, {"role": "user", "content": "again\nwith lines"}],
]


def _dir(tmp_path, name, template, *, jinja_file=False):
    d = tmp_path / name
    build_tokenizer(d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    if jinja_file:
        (d / "chat_template.jinja").write_text(template)
    else:
        cfg["chat_template"] = template
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@pytest.mark.parametrize("jinja_file", [False, True])
def test_rendering_equals_transformers(tmp_path, name, jinja_file):
    import transformers

    template = TEMPLATES[name]
    if name == "llama3":  # its raise_exception would fire on the "skip" role
        convs = CONVERSATIONS[:2]
    else:
        convs = CONVERSATIONS
    d = _dir(tmp_path, name, template, jinja_file=jinja_file)
    ours = Tokenizer.from_dir(d)
    hf = transformers.AutoTokenizer.from_pretrained(str(d))
    for conv in convs:
        for gen in (True, False):
            expected = hf.apply_chat_template(conv, add_generation_prompt=gen, tokenize=False)
            assert ours.apply_chat_template(conv, add_generation_prompt=gen) == expected
            ids = hf.apply_chat_template(conv, add_generation_prompt=gen, tokenize=True)
            ids = ids["input_ids"] if hasattr(ids, "keys") else ids
            assert ours.encode_chat(conv, add_generation_prompt=gen) == list(ids)


def test_raise_exception_surfaces_as_an_error(tmp_path):
    ours = Tokenizer.from_dir(_dir(tmp_path, "l3", LLAMA3_STYLE))
    with pytest.raises(Exception, match="bad role"):
        ours.apply_chat_template([{"role": "tool", "content": "x"}])


def test_the_sandbox_refuses_attribute_escapes(tmp_path):
    ours = Tokenizer.from_dir(_dir(tmp_path, "evil", "{{ messages.__class__.__mro__[1].__subclasses__() }}"))
    with pytest.raises(Exception, match="unsafe|access"):
        ours.apply_chat_template([{"role": "user", "content": "x"}])


def test_no_template_means_none(tmp_path):
    d = tmp_path / "plain"
    build_tokenizer(d)
    tok = Tokenizer.from_dir(d)
    assert tok.chat_template is None
    with pytest.raises(ValueError, match="no chat template"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])


def test_gguf_template_renders_like_transformers_reading_the_gguf(tmp_path):
    pytest.importorskip("gguf")
    import transformers

    from engine.models.gguf import gguf_tokenizer, read_gguf
    from tests.helpers.checkpoints import make_checkpoint
    from tests.helpers.gguf_files import write_gguf

    src = make_checkpoint(tmp_path / "src", "llama", hidden_size=64, overrides={"rope_scaling": None})
    out = tmp_path / "g"
    out.mkdir()
    path = write_gguf(src, out / "m.gguf", "F32", chat_template=CHATML_SMOLLM)
    ours = gguf_tokenizer(read_gguf(path))
    hf = transformers.AutoTokenizer.from_pretrained(str(out), gguf_file=path.name)
    assert ours.chat_template is not None and ours.chat_template.source == hf.chat_template
    for conv in CONVERSATIONS:
        assert ours.apply_chat_template(conv) == hf.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
