"""TaskConfig: EvalScope spellings accepted, unknown keys rejected with a did-you-mean."""

import json

import pytest

from groundscope.config import load_config
from groundscope.errors import ConfigError

BASE = {"model": "m", "api_url": "http://127.0.0.1:1/v1", "datasets": ["general_vqa"],
        "dataset_args": {"general_vqa": {"local_path": "x"}}}


def cfg(**over):
    return load_config({**BASE, **over})


def test_defaults() -> None:
    c = cfg()
    assert c.eval_batch_size == 8
    assert c.work_dir == "./outputs"
    assert c.seed == 42
    assert c.model_name == "m"


def test_unknown_top_level_key_did_you_mean() -> None:
    msg = r"config: unknown key 'datset_args' \(did you mean 'dataset_args'\?\)"
    with pytest.raises(ConfigError, match=msg):
        load_config({**BASE, "datset_args": {}})


def test_unknown_dataset_arg_did_you_mean() -> None:
    msg = r"dataset_args.general_vqa: unknown key 'subset' \(did you mean 'subset_list'\?\)"
    with pytest.raises(ConfigError, match=msg):
        cfg(dataset_args={"general_vqa": {"local_path": "x", "subset": ["a"]}})


def test_unknown_dataset_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown dataset 'general_vqq' \(did you mean 'general_vqa'\?\)"):
        cfg(datasets=["general_vqq"], dataset_args={})


def test_unknown_metric_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown metric 'Rogue' \(did you mean"):
        cfg(dataset_args={"general_vqa": {"local_path": "x", "metric_list": ["Rogue"]}})


def test_evalscope_metric_names_translate() -> None:
    c = cfg(dataset_args={"general_vqa": {"local_path": "x", "metric_list": ["BLEU", "Rouge"]}})
    assert c.dataset_args["general_vqa"].metric_list == ["bleu", "rouge"]


def test_limit_int_and_fraction() -> None:
    assert cfg(limit=5).limit == 5
    assert cfg(limit=5.0).limit == 5
    assert cfg(limit=0.5).limit == 0.5
    with pytest.raises(ConfigError, match="limit"):
        cfg(limit=1.5)


def test_api_url_required_for_openai_api() -> None:
    with pytest.raises(ConfigError, match="api_url: required"):
        load_config({**BASE, "api_url": None})


def test_mock_needs_no_url() -> None:
    c = load_config({**BASE, "api_url": None, "eval_type": "mock"})
    assert c.eval_type == "mock"


def test_env_expansion_of_api_key(monkeypatch) -> None:
    monkeypatch.setenv("GS_TEST_KEY", "sk-secret-123")
    c = cfg(api_key="$GS_TEST_KEY")
    assert c.api_key.get_secret_value() == "sk-secret-123"
    assert "sk-secret-123" not in repr(c)
    assert "sk-secret-123" not in json.dumps(c.redacted())


def test_env_expansion_in_judge(monkeypatch) -> None:
    monkeypatch.setenv("GS_JUDGE_KEY", "sk-judge")
    c = cfg(judge={"strategy": "llm", "models": {"model_id": "j", "api_url": "http://x/v1",
                                                  "api_key": "${GS_JUDGE_KEY}"}})
    assert c.judge.models[0].api_key.get_secret_value() == "sk-judge"
    assert "sk-judge" not in json.dumps(c.redacted())
    assert c.secrets() == ["sk-judge"]


def test_unset_env_var_is_a_config_error(monkeypatch) -> None:
    monkeypatch.delenv("GS_NOT_SET", raising=False)
    with pytest.raises(ConfigError, match="api_key: environment variable GS_NOT_SET is not set"):
        cfg(api_key="$GS_NOT_SET")


def test_llm_judge_without_models_fails_before_any_request() -> None:
    with pytest.raises(ConfigError, match=r"judge\.models"):
        cfg(judge={"strategy": "llm"})


def test_generation_config_timeout_moves_to_client() -> None:
    c = cfg(generation_config={"timeout": 30, "stream": True, "max_tokens": 10})
    assert c.timeout == 30
    assert c.generation_config == {"max_tokens": 10}


def test_yaml_and_json_files(tmp_path) -> None:
    y = tmp_path / "t.yaml"
    y.write_text("model: m\napi_url: http://127.0.0.1:1/v1\ndatasets: [general_vqa]\n"
                 "dataset_args: {general_vqa: {local_path: x}}\nlimit: 3\n")
    assert load_config(y).limit == 3
    j = tmp_path / "t.json"
    j.write_text(json.dumps(BASE))
    assert load_config(str(j)).model == "m"
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:2: cannot parse config"):
        load_config(bad)


def test_dataset_args_for_unlisted_dataset() -> None:
    with pytest.raises(ConfigError, match=r"dataset_args\.general_vmcq: not among --datasets"):
        cfg(dataset_args={"general_vmcq": {"local_path": "x"}})


def test_service_is_openai_api_and_dataset_id_is_local_path() -> None:
    c = cfg(eval_type="service", dataset_args={"general_vqa": {"dataset_id": "some/dir"}})
    assert c.eval_type == "openai_api"
    assert c.dataset_args["general_vqa"].local_path == "some/dir"
