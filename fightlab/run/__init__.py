"""A training run of the stance task: the gate (`launch`: `plan_run`, `TrainPlan`; the run
folder refused there by `rundir.check_folder`), the run around the learner (`runner.Trainer`: the
task, the run folder, rows.csv, checkpoints, resume), checkpoints (`checkpoint`), a checkpoint's
policy judged by the task (`evaluate`, `reference`) and `--nworld auto`'s rule (`nworld`). The learner itself (`fightlab.rl`) sees the task only
through the door."""
