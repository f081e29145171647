"""The imperfect-model simulator as its own VLM backend type (``imperfect``): the oracle with a preset that errs.

The error rates, presets and the degradation of each sample live in :mod:`robopin.sim.model_errors`, which
the oracle backend applies itself (so a system file switches models with one argument, ``preset``); this
type only defaults to a preset that errs. The names are re-exported here for callers of the first version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from robopin.sim.model_errors import ERROR_TYPES, HALLUCINATED, PRESETS, ModelErrorRates
from robopin.sim.oracle_backend import OracleBackend, OracleBackendConfig

__all__ = ["ERROR_TYPES", "HALLUCINATED", "PRESETS", "ImperfectBackend", "ImperfectBackendConfig", "ModelErrorRates"]


@dataclass(kw_only=True)
class ImperfectBackendConfig(OracleBackendConfig):
    """The oracle backend's settings with a model preset other than the oracle by default."""

    type: ClassVar[str] = "imperfect"

    model: str = "imperfect-model"
    preset: str = "robopin"


class ImperfectBackend(OracleBackend):
    """The oracle with :class:`ModelErrorRates` applied to each sample (see the module docstring).

    The oracle backend itself applies its ``preset``/``rates`` (so a system file switches models with
    one argument); this type only defaults to a preset that errs.
    """

    config_class = ImperfectBackendConfig
    config: ImperfectBackendConfig
