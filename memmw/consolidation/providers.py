"""Chat models for consolidations the command line runs (the adapters pass the agent's own).

``consolidation.provider``: ``openai`` (``OPENAI_API_KEY``), ``openai-compatible`` (any
``/v1/chat/completions`` server at ``consolidation.base_url``: vLLM, Ollama, LM Studio,
llama.cpp's server), ``gemini`` (``GEMINI_API_KEY`` / ``GOOGLE_API_KEY``) or
``llama-cpp`` (a local GGUF file run in process). Keys and error text go through the
embedding providers' helpers (:mod:`memmw.embeddings.remote`): a key never reaches a
log or an error message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memmw.agent.chat import ChatModel, Message
from memmw.config import ConsolidationConfig
from memmw.embeddings.exceptions import MissingApiKeyError
from memmw.embeddings.remote import env_key, provider_error
from memmw.errors import ConfigError, ProviderUnavailableError

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "gemini": "gemini-2.0-flash"}


def _text(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": str(m.get("role", "user")), "content": str(m.get("content", ""))} for m in messages]


def openai_chat(config: ConsolidationConfig) -> ChatModel:
    """An OpenAI or OpenAI-compatible chat model (``/v1/chat/completions``)."""
    try:
        import openai
    except ImportError as exc:
        raise ProviderUnavailableError(
            "consolidation with an OpenAI(-compatible) model needs the OpenAI SDK: "
            "pip install 'memmw[openai]'"
        ) from exc
    compatible = config.provider == "openai-compatible"
    if compatible and not config.base_url:
        raise ConfigError("consolidation.provider 'openai-compatible' needs consolidation.base_url")
    key = config.api_key or env_key("OPENAI_API_KEY")
    if not key:
        if not compatible:
            raise MissingApiKeyError(
                "consolidation with OpenAI needs an API key: set OPENAI_API_KEY or "
                "consolidation.api_key"
            )
        key = "none"  # local servers take any key
    model = config.model or DEFAULT_MODELS["openai"]
    client = openai.OpenAI(
        api_key=key, base_url=config.base_url, timeout=config.timeout_s, max_retries=1
    )

    def call(messages: list[Message]) -> str:
        try:
            reply = client.chat.completions.create(
                model=model, messages=_text(messages), temperature=0  # type: ignore[arg-type]
            )
        except Exception as exc:
            raise provider_error(config.provider, exc, "consolidation request") from exc
        return str(reply.choices[0].message.content or "")

    return call


def gemini_chat(config: ConsolidationConfig) -> ChatModel:
    """A Gemini chat model (``google-genai``)."""
    try:
        from google import genai
    except ImportError as exc:
        raise ProviderUnavailableError(
            "consolidation with Gemini needs google-genai: pip install 'memmw[gemini]'"
        ) from exc
    key = config.api_key or env_key("GEMINI_API_KEY", "GOOGLE_API_KEY")
    if not key:
        raise MissingApiKeyError(
            "consolidation with Gemini needs an API key: set GEMINI_API_KEY (or "
            "GOOGLE_API_KEY) or consolidation.api_key"
        )
    options: Any = {"timeout": int(config.timeout_s * 1000)}
    if config.base_url:
        options["base_url"] = config.base_url
    client = genai.Client(api_key=key, http_options=options)
    model = config.model or DEFAULT_MODELS["gemini"]

    def call(messages: list[Message]) -> str:
        system = "\n\n".join(str(m["content"]) for m in messages if m.get("role") == "system")
        user = "\n\n".join(str(m["content"]) for m in messages if m.get("role") != "system")
        try:
            reply = client.models.generate_content(
                model=model,
                contents=user,
                config={"system_instruction": system or None, "temperature": 0},
            )
        except Exception as exc:
            raise provider_error("gemini", exc, "consolidation request") from exc
        return str(reply.text or "")

    return call


def llama_cpp_chat(config: ConsolidationConfig) -> ChatModel:
    """A local GGUF chat model run by llama.cpp (``consolidation.model`` is the file)."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ProviderUnavailableError(
            "consolidation with a local GGUF model needs llama.cpp bindings: "
            "pip install 'memmw[local]'"
        ) from exc
    if not config.model:
        raise ConfigError("consolidation.provider 'llama-cpp' needs consolidation.model (a .gguf file)")
    llama = llama_cpp.Llama(model_path=config.model, n_ctx=8192, verbose=False)

    def call(messages: list[Message]) -> str:
        reply: Any = llama.create_chat_completion(
            messages=_text(messages),  # type: ignore[arg-type]
            temperature=0,
        )
        return str(reply["choices"][0]["message"]["content"] or "")

    return call


def chat_model(config: ConsolidationConfig) -> ChatModel | None:
    """The configured chat model, or None for ``provider = "none"`` (dry runs only).

    Raises:
        ProviderUnavailableError: the SDK or key is missing.
        ConfigError: the provider needs a setting it does not have.
    """
    if config.provider == "none":
        return None
    if config.provider in ("openai", "openai-compatible"):
        return openai_chat(config)
    if config.provider == "gemini":
        return gemini_chat(config)
    return llama_cpp_chat(config)
