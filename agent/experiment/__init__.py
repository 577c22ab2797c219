"""`coda experiment`: methods × seeds at the same accepted-environment budget, saved cell by cell, and the tables.

Layout of an experiment directory DIR:

    DIR/experiment.json          configuration (methods, seeds, preset, backbone, code commit)
    DIR/base/<backbone>-s<seed>/ shared base policy of a seed: the run directory of the trainer server that trained
                                 it (checkpoints/base.pt, SFT on the seed demos, trained once; every cell's trainer
                                 installs it with the install_checkpoint tool), eval.json (its evaluation), meta.json
    DIR/runs/<cell>/             the cell's run directory (state.json, memory, checkpoints, rollouts, report)
    DIR/cells/<cell>.json        the cell's result, written atomically when the cell finishes
    DIR/progress.log             one line per cell started / finished
    DIR/results.md|json, DIR/ood_by_method.png   the tables and the plot (rewritten after every cell)

A cell is `<method>-s<seed>` (plus `@<backbone>` for another backbone). An interrupted experiment continues with
`--resume`: finished cells are skipped and an unfinished one resumes from its last completed step.

Transfer (when asked for):
- backbone: the deepsets backbone trained on the accepted scenes and training programs of the transformer CoDA
  cell of the same seed, with no generation (`memory_transfer`), against deepsets SFT and deepsets CoDA;
- generation programs across families: the validated generation programs of the CoDA cells (all seeds pooled)
  applied by role binding to scenes of each family: programs of the same family ("within"), of the other families
  ("cross"), and uniform variants without a program ("scratch"), with the same number of environments, rollouts
  and updates each; learning progress = success on those environments after minus before the training.

Modules: `common` (cell names, the plan, files), `cells` (the base policy, one cell, program transfer), `metrics`
(of a finished cell, and over seeds), `tables` (tables and plots), `runner` (`run_experiment`). The cell budgets
are `agent.presets.experiment_preset`.
"""

from agent.experiment.runner import run_experiment
from agent.experiment.tables import write_tables

__all__ = ["run_experiment", "write_tables"]
