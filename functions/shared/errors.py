"""The errors every function shares, and the one way a domain error becomes an HTTP answer.

Each API declares a table, error class → :class:`Refusal` (its status, its code, what the
caller reads, whether it is logged), and :func:`answer_errors` registers it: an error is
answered by the entry of its nearest class, always with the one error body of every JSON API,
``{"error": {"code": …, "message": …}}`` (:func:`functions.shared.edge.error_response`).
An API that shows some errors otherwise (a page for a browser) or counts them passes
``present``, which gets the JSON answer and returns the one to send.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from functions.shared.edge import error_response


class ConfigurationError(RuntimeError):
    """The deployment's configuration is wrong; the function cannot serve."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """How one class of error is answered (and logged)."""

    status: int | None = None  # None: the error's own ``status``
    code: str | None = None  # None: the error class's name
    message: str | None = None  # None: the error's text; else this text, never its internals
    hint: str = ""  # after the error's text: what to do instead
    retry_after: int | None = None  # seconds; None: the error's own ``retry_after``, if any
    log: str = ""  # a warning logged with the error's text as its reason
    unexpected: bool = False  # a failure the caller did not cause: logged with its traceback


def unavailable(log: str) -> Refusal:
    """A store that cannot answer now: 503 ``Unavailable``, retry after a second; logged."""
    return Refusal(503, "Unavailable", "retry shortly", retry_after=1, log=log)


ErrorTable = Mapping[type[Exception], Refusal]
Present = Callable[[Exception, Response[str]], Response[str]]


def refusal_for(error: BaseException, table: ErrorTable) -> Refusal | None:
    """The entry of ``error``'s nearest class in ``table`` (None: no class of it is there)."""
    return next((table[cls] for cls in type(error).__mro__ if cls in table), None)


def error_answer(error: BaseException, refusal: Refusal) -> Response[str]:
    """The JSON error answer ``refusal`` gives to ``error``."""
    status = refusal.status or int(getattr(error, "status", 500))
    message = refusal.message if refusal.message is not None else f"{error}{refusal.hint}"
    retry_after = refusal.retry_after or getattr(error, "retry_after", None)
    headers = {"Retry-After": str(retry_after)} if retry_after else {}
    return error_response(status, refusal.code or type(error).__name__, message, **headers)


def answer_errors(
    app: APIGatewayHttpResolver,
    table: ErrorTable,
    *,
    logger: Logger,
    present: Present | None = None,
) -> None:
    """Answer every error of a class in ``table`` as its entry says (logged as it says)."""

    def answer(error: Exception) -> Response[str]:
        refusal = refusal_for(error, table)
        assert refusal is not None  # registered for the table's classes only
        if refusal.unexpected:
            logger.exception("unexpected error")
        elif refusal.log:
            logger.warning(refusal.log, extra={"reason": str(error)})
        json = error_answer(error, refusal)
        return present(error, json) if present is not None else json

    for cls in table:
        app.exception_handler(cls)(answer)
