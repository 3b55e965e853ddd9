"""Distractors proved by running: the classic AMP mistakes applied to a snippet, and what each did.

- `rule`: the rule base (`Rule`: a name, a title, an explanation, `edit` of an `ast` tree) and the
  syntax patterns the rules share;
- `rules`: the rules, one small class each, listed in `RULES`; `one_call`: any rule's mistake made
  in one of two runs of a helper only (`@last-call`);
- `subject`: what a "GradScaler question" is (`is_gradscaler_question`), the questions held to
  three visible mutants;
- `apply`: applying them to code (`mutants_of`): each mutant's code and its readable diff
  (`quotes`: re-rendered strings in the snippet's own quotes);
- `run`: running the original and every mutant through the sandbox in parallel (`run_mutants`),
  which mutants change what the code does, and distractors from them (`as_choices`);
- `cards`: the "What if…" cards a learner sees after answering, read from the mutant record.

A domain package: it never imports the web or the command line. Its records live beside the
verification records (`app.verify.record`: `questions/verified/mutants/`).
"""
