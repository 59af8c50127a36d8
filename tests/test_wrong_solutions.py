"""The grader against its catalogue of realistic wrong solutions: every one fails, every one gets a
first-tier hint (what fails, not the fix), every classic one is named once the fixes are shown, whatever
unseen cases a check draws."""

import pytest

from npformer.course import EXERCISES, wrong_solutions


def test_every_exercise_has_wrong_solutions_in_the_catalogue():
    covered = {wrong.exercise for wrong in wrong_solutions.catalogue()}
    assert covered == set(EXERCISES)


# two draws of the unseen cases: a hint that holds on one draw only shows on the other
@pytest.mark.slow
@pytest.mark.parametrize("unseen_seed", [0, 1])
def test_the_grader_catches_every_wrong_solution_and_names_the_classic_ones(unseen_seed):
    outcomes = wrong_solutions.run(unseen_seed)
    missed = [(o.wrong.exercise, o.wrong.mistake) for o in outcomes if not o.caught]
    unnamed = [(o.wrong.exercise, o.wrong.mistake, o.wrong.hint) for o in outcomes if not o.named]
    unhinted = [(o.wrong.exercise, o.wrong.mistake) for o in outcomes if not o.hinted]
    assert not missed and not unnamed and not unhinted, (missed, unnamed, unhinted)


@pytest.mark.parametrize("mistake", ["the variance term with the wrong sign", "dgamma not summed over rows",
                                     "only the diagonal of the Jacobian", "dk from dS, not dS^T (transposed)",
                                     "eps under the square root"])
def test_the_mistakes_that_used_to_pass_or_get_a_generic_message_are_named(mistake):
    [outcome] = wrong_solutions.run(mistakes=[mistake])
    assert outcome.caught and outcome.wrong.hint and outcome.named, outcome.report
    assert "wrong at every entry" not in str(outcome.report)


def test_the_course_guide_counts_the_exercises_and_the_catalogue_as_they_are():
    """docs/course.md's counts come from the code: the graded exercises, their points, the wrong
    solutions and the classic ones (it once said 58 exercises and 187 wrong solutions)."""
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "course.md").read_text().split())
    wrongs = wrong_solutions.catalogue()
    assert f"{len(EXERCISES)} graded exercises" in text
    assert f"{sum(exercise.points for exercise in EXERCISES.values())} in all" in text
    assert (f"holds {len(wrongs)} realistic wrong solutions to the {len({w.exercise for w in wrongs})} "
            f"exercises") in text
    assert f"names the {sum(1 for w in wrongs if w.hint)} classic ones" in text
