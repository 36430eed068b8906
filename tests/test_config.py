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


# ---------------------------------------------------- issue 16 item 5: validation in pydantic

@pytest.mark.parametrize(("over", "message"), [
    ({"judge": {"models": {"model_id": "j", "api_url": "http://127.0.0.1:1/v1", "api_kye": "k"}}},
     "judge.models[0]: unknown key 'api_kye' (did you mean 'api_key'?)"),
    ({"judge": {"grounding": {"models": [{"model_id": "j", "api_url": "http://127.0.0.1:1/v1",
                                          "eval_tpye": "openai_api"}]}}},
     "judge.grounding.models[0]: unknown key 'eval_tpye' (did you mean 'eval_type'?)"),
    ({"eval_type": "mock", "simulator": {"acuracy": 0.5}},
     "simulator: unknown key 'acuracy' (did you mean 'accuracy'?)"),
    ({"judge": {"stratgy": "llm"}}, "judge: unknown key 'stratgy' (did you mean 'strategy'?)"),
    ({"judge": {"grounding": {"vote": 3}}},
     "judge.grounding: unknown key 'vote' (did you mean 'votes'?)"),
])
def test_every_block_says_did_you_mean(over: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        cfg(**over)
    assert str(err.value) == message


def test_a_config_built_in_code_gets_the_same_messages_and_checks() -> None:
    from groundscope.config import TaskConfig

    with pytest.raises(ConfigError, match=r"^simulator: unknown key 'sed' \(did you mean 'seed'\?\)$"):
        TaskConfig(datasets=["general_vqa"], eval_type="mock", simulator={"sed": 1})
    with pytest.raises(ConfigError, match=r"^datasets: unknown dataset 'general_vqq'"):
        TaskConfig(datasets=["general_vqq"], eval_type="mock")  # a cross-check, at construction


def test_an_env_key_is_expanded_and_saved_by_name_however_the_config_is_built(monkeypatch) -> None:
    from groundscope.config import TaskConfig

    monkeypatch.setenv("GS_TEST_JUDGE_KEY", "sk-from-env")
    judge = {"models": [{"model_id": "j", "api_url": "http://127.0.0.1:1/v1?token=tk",
                         "api_key": "${GS_TEST_JUDGE_KEY}"}]}
    for c in (cfg(judge=judge), TaskConfig(**BASE, judge=judge)):
        assert c.secrets() == ["tk", "sk-from-env"]
        saved = c.redacted()["judge"]["models"][0]
        assert saved["api_key"] == "${GS_TEST_JUDGE_KEY}"
        assert "tk" not in saved["api_url"] and "sk-from-env" not in json.dumps(c.redacted())
    monkeypatch.delenv("GS_TEST_JUDGE_KEY")
    with pytest.raises(ConfigError, match=r"^judge\.models\[0\]\.api_key: environment variable "
                                          r"GS_TEST_JUDGE_KEY is not set$"):
        cfg(judge=judge)


def test_saved_key_keeps_a_set_reference_only(monkeypatch) -> None:
    from groundscope.keys import saved_key

    monkeypatch.setenv("GS_TEST_SET", "x")
    monkeypatch.delenv("GS_TEST_UNSET", raising=False)
    assert saved_key("$GS_TEST_SET") == "$GS_TEST_SET"
    assert saved_key("${GS_TEST_UNSET}") is None and saved_key("***") is None
    assert saved_key(None) is None


def test_the_enums_are_built_from_the_literals() -> None:
    from typing import get_args

    from groundscope.constants import EvalType, EvalTypeName, JudgeStrategy, JudgeStrategyName

    assert {e.value for e in EvalType} == set(get_args(EvalTypeName))
    assert {e.value for e in JudgeStrategy} == set(get_args(JudgeStrategyName))
    assert EvalType.SERVICE is EvalType.OPENAI_API


def test_simulate_refuses_a_bad_flag_in_one_line_before_serving(tmp_path) -> None:
    from cli_support import run_cli

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "alpha.jsonl").write_text(
        json.dumps({"id": "1", "question": "q?", "answer": "a"}) + "\n")
    proc = run_cli("simulate", "--datasets", "general_vqa", "--dataset-args",
                   '{"general_vqa": {"local_path": "data"}}', "--judge-noise", "2",
                   "--port", "0", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == ("groundscope: error: simulate: judge_noise: Input should be "
                                   "less than or equal to 1 (got 2.0)")


def test_a_block_that_is_not_a_mapping_is_named_without_class_names() -> None:
    with pytest.raises(ConfigError) as err:
        cfg(judge="llm")
    assert str(err.value) == "judge: Input should be a valid dictionary (got 'llm')"


def test_the_judges_repair_turns_are_max_repairs_and_the_old_name_is_noted_once(caplog) -> None:
    """``max_retries`` meant transport retries in the task config and repair turns in the
    judge block; the judge's is ``max_repairs``. The old name still reads, with one note."""
    import logging

    from groundscope import compat
    from groundscope.config import JudgeConfig

    compat.noted_renames.clear()
    with caplog.at_level(logging.WARNING, logger="groundscope"):
        cfg = load_config({"model": "m", "api_url": "http://h/v1", "datasets": ["general_vqa"],
                                "max_retries": 7,
                                "judge": {"max_retries": 1, "grounding": {"max_retries": 0}}})
        JudgeConfig(max_retries=3)
    assert (cfg.max_retries, cfg.judge.max_repairs, cfg.judge.grounding.max_repairs) == (7, 1, 0)
    notes = [r.getMessage() for r in caplog.records]
    assert notes == ["judge.max_retries is deprecated: it is now judge.max_repairs (the same value)",
                     "judge.grounding.max_retries is deprecated: it is now "
                     "judge.grounding.max_repairs (the same value)"]
    assert "max_retries" not in cfg.judge.model_dump()
    with pytest.raises(ConfigError, match="max_retries"):  # both names: the old one is unknown
        load_config({"model": "m", "api_url": "http://h/v1", "datasets": ["general_vqa"],
                          "judge": {"max_retries": 1, "max_repairs": 2}})
