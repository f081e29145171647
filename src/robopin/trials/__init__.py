"""Trials: a JSON-lines log per trial (steps + summary), who judged it, the batch's results and report, the console.

- :mod:`robopin.trials.log`: :class:`TrialLog`, :class:`TrialStep`, :class:`TrialSummary`, :func:`read_trial`.
- :mod:`robopin.trials.judging`: the operator's :class:`~robopin.trials.judging.Judgement` (fixed failure reasons,
  judge files) beside the stack's own :class:`~robopin.trials.judging.StackVerdict`; the simulator as judge.
- :mod:`robopin.trials.operator`: the operator protocol of a batch (scene set-up, judgement) and its terminal and
  scripted front ends; :mod:`robopin.trials.console`: the browser console (stdlib HTTP server, loopback only).
- :mod:`robopin.trials.scenes`: what the operator sets up (real-cell scenario files, simulated layouts in words).
- :mod:`robopin.trials.results`: RoboPIN's Table 6 from the judgements, failures by reason, agreement, sub-goals.
- :mod:`robopin.trials.report`: :func:`build_report`, :func:`write_report` (success table, bar plot, per-trial views).
- :mod:`robopin.trials.sim_trial`: :func:`record_sim_trial` (a dry-run pointing trial in the simulator, bag + log).
"""

from robopin.trials.log import TrialLog, TrialLogError, TrialStep, TrialSummary, read_trial
from robopin.trials.report import ReportError, build_report, write_report

__all__ = ["ReportError", "TrialLog", "TrialLogError", "TrialStep", "TrialSummary", "build_report", "read_trial",
           "write_report"]
