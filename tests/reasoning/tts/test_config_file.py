"""The shipped config/tts.yaml loads into both the loop's config and E-TTS's, with the paper's values."""

from __future__ import annotations

from pathlib import Path

import yaml

from robopin.reasoning import ReasoningConfig
from robopin.reasoning.tts import TTSConfig

CONFIG = Path(__file__).resolve().parents[3] / "config" / "tts.yaml"


def test_config_file_loads_with_the_paper_defaults():
    block = yaml.safe_load(CONFIG.read_text())["reasoning"]
    ReasoningConfig.from_dict(block)
    config = TTSConfig.from_dict(block["reasoner"])
    assert (config.selection.epsilon, config.selection.threshold, config.reasoning_verifier.history) == (0.1, 0.4, 3)
    # The file spells out every default: what it says is what the code does without it.
    assert config == TTSConfig()
