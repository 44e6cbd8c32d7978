"""`rnnsearch demo`, `figure` and `experiment`: the paper's claims, reproduced."""

from __future__ import annotations

from pathlib import Path


def add_demo(sub) -> None:
    from rnnsearch.tools.demo import DEMO_STEPS, DEMO_TARGET_LOSS

    p = sub.add_parser("demo", help="English→Chinese demo: train, translate, show attention (minutes)")
    p.add_argument("--out", default="rnnsearch-demo", help="output directory (default ./rnnsearch-demo)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sentences", type=int, default=20000, help="training sentences to generate")
    p.add_argument("--steps", type=int, default=DEMO_STEPS,
                   help=f"most training steps (default {DEMO_STEPS}); training stops sooner, at the "
                        f"validation loss {DEMO_TARGET_LOSS} (docs/demo.md: how many steps and minutes). "
                        "A slower machine takes longer and trains the same model")
    p.add_argument("--minutes", type=float, default=0.0,
                   help="optional wall-clock cap on training (0: none)")
    p.add_argument("--epochs", type=int, default=0, help="optional cap on epochs (0: none)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a demo setting")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> None:
    from rnnsearch.tools.demo import run_demo

    run_demo(args.out, seed=args.seed, n_train=args.sentences, steps=args.steps, minutes=args.minutes,
             epochs=args.epochs, overrides=args.set or [], progress=not args.no_progress)


def add_figure(sub) -> None:
    p = sub.add_parser("figure",
                       help="the structure figure: untrained/trained attention, access maps")
    p.add_argument("name", choices=["structure"])
    p.add_argument("--out", default="figures")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=12, help="training epochs for the reversal panel")
    p.set_defaults(func=cmd_figure)


def cmd_figure(args) -> None:
    from rnnsearch.tools.figures import format_matrix, structure_figure

    r = structure_figure(args.out, seed=args.seed, epochs=args.epochs)
    print(format_matrix(r["untrained_attention"], "untrained attention (rows ≈ 1/7 ≈ 0.143):"))
    print(f"  mean {r['untrained_mean']:.3f}, "
          f"largest deviation from 1/7: {r['untrained_max_deviation']:.3f}\n")
    for key, label in (
            ("access_rnnencdec", "RNNencdec ‖∂c_i/∂h_j‖ (only the last state reaches the decoder):"),
            ("access_rnnsearch", "RNNsearch ‖∂c_i/∂h_j‖ (every state reaches every step):")):
        print(format_matrix(r[key], label) + "\n")
    print(format_matrix(r["trained_reverse_attention"], "after training to reverse (anti-diagonal):"))
    print(f"\nwrote {Path(args.out) / 'structure.png'} and structure.json")


def add_experiment(sub) -> None:
    p = sub.add_parser("experiment", help="reproduce a claim: length-curve, reverse, scores")
    p.add_argument("name", nargs="+", choices=["length-curve", "reverse", "scores"],
                   help="one or more; models two experiments share are trained once")
    p.add_argument("--corpus", default="synthetic",
                   choices=["synthetic", "europarl-it-en", "multi30k-de-en"])
    p.add_argument("--budget-minutes", type=float, default=3.0, help="training minutes per model")
    p.add_argument("--budget-steps", type=int, default=0,
                   help="training steps per model instead of minutes: the same budget on a busy or a "
                        "faster machine")
    p.add_argument("--out", help="directory shared by the experiments on a corpus (default "
                   "experiments/CORPUS): data, models/ (finished ones are reused), NAME/ results")
    p.add_argument("--data", default="data", help="directory holding the real corpora, as "
                   "`rnnsearch data get` writes them (default ./data)")
    p.add_argument("--train-sentences", type=int, default=30000,
                   help="synthetic: sentences to generate; real corpora: seeded subsample (0: all)")
    p.add_argument("--test-sentences", type=int, default=1000,
                   help="synthetic: test sentences to generate; real corpora: seeded subsample of the test "
                        "split (0: all); the validation split is capped at 1,000 the same way")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override for every model, e.g. --set model.hidden=512 --set train.device=cuda")
    p.add_argument("--jobs", type=int, default=1,
                   help="models trained at once, each a process of its own with train.threads threads "
                        "(default: the cores shared out); on a GPU they share it")
    p.add_argument("--score-trained", action="store_true",
                   help="train nothing: score the models that have finished and write the results, "
                        "the rest listed as not trained yet (a look at a long run while it trains)")
    p.add_argument("--only", action="append", metavar="SYSTEM",
                   help="train just this system (repeatable; a label of the results table, e.g. "
                        "RNNsearch-50 or 'RNNsearch reversed'), then score it with the others that "
                        "have finished: a long run shared out between machines or sessions")
    p.set_defaults(func=cmd_experiment)


def cmd_experiment(args) -> None:
    from rnnsearch.tools.experiments import results_markdown, run_experiments

    results = run_experiments(args.name, corpus=args.corpus, minutes=args.budget_minutes, out_dir=args.out,
                              data_root=args.data, train_sentences=args.train_sentences, seed=args.seed,
                              test_sentences=args.test_sentences, overrides=args.set or [],
                              steps=args.budget_steps, jobs=args.jobs, train=not args.score_trained,
                              only=args.only or ())
    for r in results:
        print(f"## {r['experiment']}\n\n{results_markdown(r)}")
