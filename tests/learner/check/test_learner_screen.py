"""What a learner sees when a check fails: the message, not a traceback through the checks' internals."""
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook


def test_a_failed_check_shows_only_its_message_and_still_ends_the_cell_in_an_error():
    nb = new_notebook(cells=[
        new_code_cell("from learner.check import check"),
        new_code_cell("def softmax(x, dim=-1, temperature=1.0):\n    return x  # forgot everything\n\n"
                      "check('softmax', softmax)"),
        new_code_cell("check('softmax', softmax, part='edge')")])
    NotebookClient(nb, timeout=300, allow_errors=True).execute()
    for cell in nb.cells[1:]:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert len(errors) == 1, cell.outputs  # nbgrader reads the error: the cell scores zero
        error = errors[0]
        assert error.ename == "CheckFailed" and "softmax" in error.evalue
        shown = "\n".join(error.traceback)
        assert len(error.traceback) == 1 and error.evalue in shown
        for internal in ("Traceback", "_Run", "finish", "grader/", "File "):
            assert internal not in shown, f"{internal!r} in what the learner sees:\n{shown}"
