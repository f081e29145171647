"""Trials: a JSON-lines log per trial (steps + summary), a self-contained HTML/JSON report, a recorded sim trial.

- :mod:`robopin.trials.log`: :class:`TrialLog`, :class:`TrialStep`, :class:`TrialSummary`, :func:`read_trial`.
- :mod:`robopin.trials.report`: :func:`build_report`, :func:`write_report` (success table, bar plot, per-trial views).
- :mod:`robopin.trials.sim_trial`: :func:`record_sim_trial` (a dry-run pointing trial in the simulator, bag + log).
"""

from robopin.trials.log import TrialLog, TrialLogError, TrialStep, TrialSummary, read_trial
from robopin.trials.report import ReportError, build_report, write_report

__all__ = ["ReportError", "TrialLog", "TrialLogError", "TrialStep", "TrialSummary", "build_report", "read_trial",
           "write_report"]
