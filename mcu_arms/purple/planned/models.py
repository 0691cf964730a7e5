"""The planned agent's two model services, as the network sees them.

- `ChatModel`: an OpenAI-compatible chat endpoint (vLLM, llama.cpp's llama-server, a hosted API) through the `openai`
  client: the planner, and the policy when `backend = "chat"`.
- `DecisionService`: a Kev-style decision service. `GET /v1/models` says what it runs (`models[0].run` is
  `MODEL@REVISION`, checked at start); `POST /v1/systemone` takes `{model, state, questions: {action: {type:
  "choice", instructions, criteria: {id: description}}}}` and answers `answers.action.choice` and
  `answers.action.probabilities`.

A call that brings no answer raises ModelCallFailed with its cause (contracts/planned.py ModelFailure); what an answer
says is validated by the caller. Imports openai and httpx: only the planned agent imports this module.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import httpx
from openai import APIConnectionError, APIError, APIStatusError, APITimeoutError, AsyncOpenAI

from mcu_arms.contracts.planned import ModelFailure
from mcu_arms.http_cap import ResponseTooLarge, answer_cap, too_large_in

Role = Literal["planner", "policy"]
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
KEY_PLACEHOLDER = "not-needed"  # local servers take any key; the client insists on one
DECISION_INSTRUCTIONS = "Choose the next allowed Minecraft action given the state and optional goal."


class ModelCallFailed(Exception):
    def __init__(self, cause: ModelFailure, message: str) -> None:
        super().__init__(message)
        self.cause = cause


def _http_client(base_url: str, timeout: float) -> httpx.AsyncClient:
    """A loopback service is reached directly; a remote one through the proxies the environment names. Its answers
    are read against the cap on answers (http_cap): one past it is a failed call that says so."""
    host = urlsplit(base_url).hostname or ""
    hooks = {"response": [answer_cap()]}
    return httpx.AsyncClient(timeout=timeout, trust_env=host not in LOOPBACK_HOSTS, event_hooks=hooks)


def _failure(error: BaseException) -> str:
    too_large = too_large_in(error)
    return str(too_large) if too_large is not None else f"{type(error).__name__}: {error}"


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def template_switches(thinking: bool | None) -> dict[str, Any]:
    """What every chat request carries beside the messages: `thinking` as the chat template's `enable_thinking`
    (vLLM and llama.cpp's llama-server with --jinja pass `chat_template_kwargs` to the template; Qwen3's reads it).
    None: nothing, the server's default."""
    return {} if thinking is None else {"chat_template_kwargs": {"enable_thinking": thinking}}


class ChatModel:
    def __init__(
        self, role: Role, base_url: str, model: str, api_key: str | None, timeout: float, thinking: bool | None = None
    ) -> None:
        self.role = role
        self.extra_body = template_switches(thinking)
        self.base_url = base_url
        self.model = model
        self.timeout = timeout
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or KEY_PLACEHOLDER,
            timeout=timeout,
            max_retries=0,  # a failed call is counted, not hidden behind retries
            # openai 3 takes an httpx client too (is_legacy_httpx_async_client); its annotation names httpx2's only
            http_client=_http_client(base_url, timeout),  # type: ignore[arg-type]
        )

    def _failed(self, what: Literal["timeout", "error"], detail: str) -> ModelCallFailed:
        """A failed call, counted under this model's role (planner_timeout, policy_error, ...)."""
        return ModelCallFailed(cast(ModelFailure, f"{self.role}_{what}"), detail)

    async def check_served(self) -> None:
        """The endpoint answers and, when it lists its models, serves this one (vLLM: --served-model-name)."""
        try:
            listing = await self._client.models.list()
        except APITimeoutError:
            raise self._failed("timeout", f"{self.base_url} did not answer in {self.timeout:g} s") from None
        except APIConnectionError as error:
            raise self._failed("error", f"{self.base_url} is unreachable: {error}") from None
        except APIStatusError:
            return  # it does not list its models; the first call will tell
        served = [entry.id for entry in listing.data]
        if self.model not in served:
            raise self._failed("error", f"{self.base_url} serves {served}, not {self.model!r}")

    async def complete(self, messages: list[dict[str, str]]) -> tuple[str, float]:
        """The answer's text and the round trip in ms."""
        started = time.perf_counter()
        try:
            # the messages are plain role/content dicts, which openai's TypedDict unions do not accept as typed
            response = await self._client.chat.completions.create(  # type: ignore[call-overload]
                model=self.model,
                messages=messages,
                temperature=0,
                response_format={"type": "json_object"},
                extra_body=self.extra_body or None,
            )
        except APITimeoutError:
            raise self._failed("timeout", f"no answer within {self.timeout:g} s") from None
        except (APIConnectionError, APIError) as error:
            raise self._failed("error", _failure(error)) from None
        content = response.choices[0].message.content if response.choices else None
        return content or "", _elapsed_ms(started)

    async def close(self) -> None:
        await self._client.close()


class DecisionService:
    def __init__(self, base_url: str, model: str, revision: str | None, api_key: str | None, timeout: float) -> None:
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.model = model
        self.revision = revision
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = _http_client(self.root, timeout)
        self._http.headers.update(headers)

    async def check_revision(self) -> str:
        """What the service runs, if it is `MODEL@REVISION`; ModelCallFailed saying what it runs instead."""
        try:
            response = await self._http.get(f"{self.root}/v1/models")
            response.raise_for_status()
            card = (response.json().get("models") or [{}])[0]
        except httpx.TimeoutException:
            raise ModelCallFailed(
                "policy_timeout", f"{self.root}/v1/models did not answer in {self.timeout:g} s"
            ) from None
        except (httpx.HTTPError, ValueError, AttributeError, ResponseTooLarge) as error:
            raise ModelCallFailed("policy_error", f"{self.root}/v1/models: {error}") from None
        run = str(card.get("run", ""))
        if run != f"{self.model}@{self.revision}":
            raise ModelCallFailed(
                "policy_error",
                f"the decision service runs {run or 'nothing it names'!r}, not {self.model}@{self.revision}",
            )
        return run

    async def choose(self, state: dict[str, Any], criteria: dict[str, str]) -> tuple[Any, float]:
        """The service's `answers.action` (whatever it holds) and the round trip in ms."""
        body = {
            "model": self.model,
            "state": state,
            "questions": {"action": {"type": "choice", "instructions": DECISION_INSTRUCTIONS, "criteria": criteria}},
        }
        started = time.perf_counter()
        try:
            response = await self._http.post(f"{self.root}/v1/systemone", json=body)
            response.raise_for_status()
            data = response.json()
        except httpx.TimeoutException:
            raise ModelCallFailed("policy_timeout", f"no decision within {self.timeout:g} s") from None
        except (httpx.HTTPError, ResponseTooLarge) as error:
            raise ModelCallFailed("policy_error", _failure(error)) from None
        except json.JSONDecodeError:
            return None, _elapsed_ms(started)  # an answer, unusable: the caller counts it as invalid
        answers = data.get("answers") if isinstance(data, dict) else None
        return (answers or {}).get("action") if isinstance(answers, dict) else None, _elapsed_ms(started)

    async def close(self) -> None:
        await self._http.aclose()
