"""The model registry: the shipped file validates, feeds real VLM configs, and bad entries fail by name."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from robopin.models import (
    ModelRegistryError,
    ModelServeError,
    UnknownModelError,
    load_registry,
    registry_from_dict,
    vllm_arguments,
)
from robopin.models.registry import CHECKOUT_REGISTRY
from robopin.vlm import config_from_dict

REGISTRY_FILE = Path(__file__).resolve().parents[2] / "models" / "registry.yaml"


def flags(args: list[str]) -> dict[str, str]:
    """``--name value`` pairs of a vLLM argument list (the model path is the first, bare argument)."""
    return {args[i][2:]: args[i + 1] for i in range(1, len(args) - 1) if args[i].startswith("--")}


@pytest.fixture(scope="module")
def registry():
    return load_registry(REGISTRY_FILE)


@pytest.fixture
def document() -> dict:
    return yaml.safe_load(REGISTRY_FILE.read_text(encoding="utf-8"))


def test_default_registry_is_the_checkout_file(monkeypatch):
    monkeypatch.delenv("ROBOPIN_MODEL_REGISTRY", raising=False)
    assert CHECKOUT_REGISTRY == REGISTRY_FILE
    assert load_registry().names() == load_registry(REGISTRY_FILE).names()


def test_registry_lists_the_supported_models(registry):
    names = registry.names()
    assert "robopin-4b" in names and "embodied-r1-3b" in names and "openai-endpoint" in names
    qwen3 = [spec for spec in registry if spec.hub_id.startswith("Qwen/Qwen3-VL-") and spec.hub_id.endswith("Instruct")]
    assert len(qwen3) >= 3, "the issue asks for the Qwen3-VL instruct sizes"
    assert registry["robopin-4b"].hub_id == "QwQ2/RoboPIN-4B"


def test_every_entry_gives_a_planner_config_the_vlm_layer_accepts(registry):
    for spec in registry:
        config = config_from_dict(spec.vlm_config("http://gpu-server:8000/v1"))
        assert config.point_convention == spec.point_convention
        assert config.model == spec.serve.served_model_name
        if spec.point_convention == "pixels_resized":
            # The client maps answers back with the same resize limits the server is started with.
            convention = config.convention()
            assert (convention.min_pixels, convention.max_pixels) == (spec.min_pixels, spec.max_pixels)
            processor = json.loads(flags(vllm_arguments(spec))["mm-processor-kwargs"])
            assert processor == {"min_pixels": spec.min_pixels, "max_pixels": spec.max_pixels}


def test_robopin_4b_is_served_with_the_agreed_vllm_flags(registry):
    args = vllm_arguments(registry["robopin-4b"], "/models/robopin-4b", port=8123)
    assert args[0] == "/models/robopin-4b"
    got = flags(args)
    assert got["served-model-name"] == "vlm"
    assert got["max-model-len"] == "32768"
    assert json.loads(got["limit-mm-per-prompt"]) == {"image": 4, "video": 0}
    assert got["max-num-seqs"] == "16"
    assert got["max-logprobs"] == "20"
    assert got["port"] == "8123"
    assert "tensor-parallel-size" not in got


def test_serving_from_the_hub_names_the_hub_id_and_a_pinned_revision(registry, document):
    assert vllm_arguments(registry["qwen3-vl-8b-instruct"])[0] == "Qwen/Qwen3-VL-8B-Instruct"
    document["models"]["robopin-4b"]["revision"] = "0123abc"
    pinned = registry_from_dict(document)["robopin-4b"]
    assert flags(vllm_arguments(pinned))["revision"] == "0123abc"


def test_overrides_reach_the_command_and_bad_overrides_are_refused(registry):
    got = flags(vllm_arguments(registry["qwen3-vl-32b-instruct"], tensor_parallel_size=2, gpu_memory_utilization=0.8))
    assert got["tensor-parallel-size"] == "2"
    assert got["gpu-memory-utilization"] == "0.8"
    with pytest.raises(ModelServeError, match="tensor_parallel_size must be >= 1, got 0"):
        vllm_arguments(registry["robopin-4b"], tensor_parallel_size=0)
    with pytest.raises(ModelServeError, match=r"port must be in 1\.\.65535, got 70000"):
        vllm_arguments(registry["robopin-4b"], port=70000)


def test_an_endpoint_has_nothing_to_serve(registry):
    with pytest.raises(ModelServeError, match="served elsewhere"):
        vllm_arguments(registry["openai-endpoint"])
    assert registry["openai-endpoint"].vlm_config()["api_key_env"] == "ROBOPIN_VLM_API_KEY"


def test_memory_figures_cover_the_weights(registry):
    for spec in registry:
        if spec.kind == "hub":
            assert spec.weights_gb == pytest.approx(spec.parameters_b * 2.0)
            assert spec.min_gpu_gb >= spec.weights_gb


def test_unknown_model_names_the_known_ones(registry):
    with pytest.raises(UnknownModelError, match=r"unknown model 'gpt-robot'.*robopin-4b"):
        registry["gpt-robot"]


def _set(model: str, **fields):
    """An edit of the parsed registry that updates one entry's fields."""
    return lambda document: document["models"][model].update(fields)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set("robopin-4b", point_convention="pixel"), r"point_convention must be one of .* got 'pixel'"),
        (_set("robopin-4b", hub_id="RoboPIN-4B"), r"hub_id must look like 'owner/name', got 'RoboPIN-4B'"),
        (_set("robopin-4b", memory={"min_gpu_gb": 4}), r"min_gpu_gb 4.0 is less than its bfloat16 weights"),
        (_set("robopin-4b", colour="red"), r"unknown keys \['colour'\]"),
        (_set("robopin-4b", serve={"max_logprobs": 50}), r"max_logprobs must be in 0\.\.20, got 50"),
        (_set("robopin-4b", serve={"tp": 2}), r"unknown serve keys \['tp'\]"),
        (_set("robopin-4b", serve={"max_num_seqs": "16"}), r"serve.max_num_seqs must be int, got '16'"),
        (_set("robopin-4b", serve={"limit_mm_per_prompt": {"image": 0}}), r"image must be >= 1"),
        (lambda d: d["models"]["robopin-4b"].pop("answer_format"), r"missing required key 'answer_format'"),
        (_set("openai-endpoint", base_url="gpu-server:8000"), r"base_url starting with http"),
        (lambda d: d["models"].update({"Bad Name": d["models"]["robopin-4b"]}), r"model name must match"),
        (lambda d: d.update(schema=2), r"schema must be 1, got 2"),
    ],
)
def test_bad_entries_fail_naming_the_value(document, edit, message):
    broken = copy.deepcopy(document)
    edit(broken)
    with pytest.raises(ModelRegistryError, match=message):
        registry_from_dict(broken)


def test_unreadable_registry_files_fail_clearly(tmp_path):
    with pytest.raises(ModelRegistryError, match="does not exist; set ROBOPIN_MODEL_REGISTRY"):
        load_registry(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [unclosed\n", encoding="utf-8")
    with pytest.raises(ModelRegistryError, match="is not valid YAML"):
        load_registry(bad)


def test_registry_path_and_models_dir_follow_the_environment(tmp_path, monkeypatch, document):
    from robopin.models import default_models_dir

    own = tmp_path / "site.yaml"
    document["models"] = {"robopin-4b": document["models"]["robopin-4b"]}
    own.write_text(yaml.safe_dump(document), encoding="utf-8")
    monkeypatch.setenv("ROBOPIN_MODEL_REGISTRY", str(own))
    monkeypatch.setenv("ROBOPIN_MODELS_DIR", str(tmp_path / "weights"))
    assert load_registry().names() == ["robopin-4b"]
    assert default_models_dir() == tmp_path / "weights"
