"""The environment a student's kernel has, for the tests that run notebooks as a student would."""

import os

# Not a student's: the TensorFlow variables the course's tools set, and pytest's marker, which
# makes ipykernel stop forwarding what is written to file descriptor 2 (TensorFlow's C++ lines
# go there) to the notebook, so they would go unseen under pytest.
NOT_A_STUDENTS = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "PYTEST_CURRENT_TEST")


def student_env() -> dict[str, str]:
    """This process's environment as a student's kernel would have it."""
    return {k: v for k, v in os.environ.items() if k not in NOT_A_STUDENTS}
