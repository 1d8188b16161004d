"""Secret redaction for everything memmw stores or prints: transcripts, errors, logs, reprs.

Internal module: import its public names from ``memmw``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

REDACTED = "[REDACTED]"

# ---------------------------------------------------------------------------------------
# Private key blocks: PEM and PGP, across lines and across messages.

_BLOCK_LABEL = r"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?"
_BEGIN = re.compile(rf"-----\s*BEGIN {_BLOCK_LABEL}\s*-----")
_END = re.compile(rf"-----\s*END {_BLOCK_LABEL}\s*-----")
_WHOLE_BLOCK = re.compile(rf"{_BEGIN.pattern}.*?{_END.pattern}", re.DOTALL)
#: A key body continued from an earlier message: base64 lines then the END marker.
_TAIL_OF_BLOCK = re.compile(rf"\A[A-Za-z0-9+/=\s:\-.,]*?{_END.pattern}", re.DOTALL)
#: An OpenSSH key body without markers still looks like this (base64, "b3BlbnNzaC1rZXk").
_OPENSSH_BODY = re.compile(r"b3BlbnNzaC1rZXktdjE[A-Za-z0-9+/=\s]{20,}")


def _redact_blocks(text: str, in_block: bool) -> tuple[str, bool]:
    """Redact private key blocks; returns the text and whether a block is still open."""
    if in_block:
        end = _END.search(text)
        if end is None:
            return REDACTED, True
        text = REDACTED + text[end.end() :]
    else:
        tail = _TAIL_OF_BLOCK.match(text)
        if tail is not None and _BEGIN.search(tail.group()) is None:
            # A message that ends a key begun elsewhere (split paste, transcript cut).
            text = REDACTED + text[tail.end() :]
    text = _WHOLE_BLOCK.sub(REDACTED, text)
    begin = _BEGIN.search(text)
    if begin is not None:  # unterminated: hide the rest, and the next messages until END
        return text[: begin.start()] + REDACTED, True
    return _OPENSSH_BODY.sub(REDACTED, text), False


# ---------------------------------------------------------------------------------------
# Token shapes (provider-specific prefixes; precise, so no false alarms on prose).

_AWS_PREFIXES = ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA", "ABIA", "ACCA")

#: (literal triggers, pattern): a rule runs only when one of its triggers is in the text,
#: which keeps redaction of an ordinary message to a few substring checks.
_TOKEN_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (triggers, re.compile(p))
    for triggers, p in (
        # Anthropic, OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-), short sk- keys too.
        (("sk-",), r"\bsk-ant-[A-Za-z0-9_\-]{8,}"),
        (("sk-",), r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{12,}"),
        (("sk-",), r"\bsk-[A-Za-z0-9]{20,}"),
        (("sk-",), r"\bsk-(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{8,}"),
        (("k_live_", "k_test_"), r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{8,}"),  # Stripe
        (("whsec_",), r"\bwhsec_[A-Za-z0-9]{16,}"),  # Stripe webhook secret
        (("AIza",), r"\bAIza[0-9A-Za-z_\-]{35}"),  # Google API key
        (("ya29.",), r"\bya29\.[0-9A-Za-z_\-]{20,}"),  # Google OAuth token
        (("GOCSPX-",), r"\bGOCSPX-[A-Za-z0-9_\-]{20,}"),  # Google OAuth client secret
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub
        (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{40,}"),
        (("glpat-",), r"\bglpat-[A-Za-z0-9_\-]{20,}"),  # GitLab
        (_AWS_PREFIXES, rf"\b(?:{'|'.join(_AWS_PREFIXES)})[0-9A-Z]{{16}}\b"),  # AWS key ids
        (("xox",), r"\bxox[abposre]-[A-Za-z0-9\-]{10,}"),  # Slack tokens
        (("xapp-",), r"\bxapp-\d-[A-Za-z0-9\-]{10,}"),
        (("hooks.slack.com",),
         r"https?:/{1,2}hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+"),
        (("/api/webhooks/",), r"https?:/{1,2}discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+"),
        ((".webhook.office.com",), r"https?:/{1,2}[a-z0-9\-]+\.webhook\.office\.com/[^\s\"'<>]+"),
        (("eyJ",), r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),  # JWT
        (("SG.",), r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),  # SendGrid
        (("AC", "SK"), r"\b(?:AC|SK)[0-9a-f]{32}\b"),  # Twilio
        (("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),  # npm
        (("pypi-",), r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"),  # PyPI
        (("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),  # Hugging Face
        (("dop_v1_",), r"\bdop_v1_[a-f0-9]{64}\b"),  # DigitalOcean
        ((":AA",), r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}\b"),  # Telegram bot
        (("key-",), r"\bkey-[0-9a-f]{32}\b"),  # Mailgun
        (("sq0",), r"\bsq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}"),  # Square
        (("shpat_", "shpca_", "shppa_", "shpss_"), r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
        (("glc_",), r"\bglc_[A-Za-z0-9+/=]{32,}"),  # Grafana
        (("AGE-SECRET-KEY-",), r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b"),  # age
    )
)

# ---------------------------------------------------------------------------------------
# Assignments and prose: "api_key=...", "AccountKey=...", "my password is ...", PINs.

_SECRET_NAME = (
    r"[\w.\-]*?(?:api[_\-]?key|apikey|secret|token|passw(?:or)?d|passwd|pwd|passphrase"
    r"|access[_\-]?key|private[_\-]?key|credentials?|account[_\-]?key|shared[_\-]?access[_\-]?key"
    r"|client[_\-]?secret|auth|sig|signature|(?<![a-z])pass|(?:client[_\-]?)?key[_\-]data)"
    r"(?:[_\-]?(?:id|value|key))?"
)
_ASSIGNMENT = re.compile(
    rf"""(?ix)
    (\b{_SECRET_NAME}["']?\s*[:=]\s*)   # name, optional quote, := with spaces
    (["']?)((?<=")[^"\n]+(?=")|(?<=')[^'\n]+(?=')|[^\s"',;]{{3,}})(\2)
    """
)
#: Connection strings: ``AccountKey=...;`` and ``Password=...;`` keep the separator.
_CONN_STRING = re.compile(
    r"(?i)\b((?:Account|SharedAccess|Primary|Secondary)Key|SharedAccessSignature"
    r"|Password|Pwd)=([^;\s]+)"
)
#: ``scheme://user:password@host`` (or ``scheme:/`` once a path normaliser folded ``//``):
#: the password runs to the token's last ``@`` (a raw
#: ``@``, ``:`` or ``/`` in a password is still hidden whole); the user may be empty.
_URL_USERINFO = re.compile(r"\b([a-z][a-z0-9+.\-]*:/{1,3}[^\s:/@'\"<>]*):(?!\d{1,5}/)([^\s'\"<>]+)@", re.IGNORECASE)
_AUTH_HEADER = re.compile(r"\b(Bearer|Basic|Token|Digest)\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE)
#: "my password is X", "the passphrase was: X", "password for the NAS is X".
_PROSE_SECRET = re.compile(
    r"""(?ix)
    \b(pass(?:word|wd|phrase|code)|pass\ phrase|pwd|secret\ key|client\ secret|api\ key|access\ key
       |security\ answer|recovery\ code|seed\ phrase|mnemonic)
    ((?:\s+(?:for|to|of|on)\s+(?:the\ |my\ |our\ )?[\w.@\-]+(?:\s+[\w.@\-]+)?)?
     \s*(?:\bis\b|\bwas\b|\bare\b|:|=|\bto\b|-)\s*)
    (["'`]?)([^\s"'`]{3,})
    """
)
#: Passphrases, seed phrases and mnemonics are several words: hide them to the line end.
_PROSE_PHRASE = re.compile(
    r"""(?ix)
    \b((?:pass\ ?phrase|seed\ phrase|mnemonic|recovery\ phrase)
     (?:\s+(?:for|to|of|on)\s+(?:the\ |my\ )?[\w.@\-]+)?
     \s*(?:\bis\b|\bwas\b|:|=)\s*)
    ([^\n]+)
    """
)
_PIN = re.compile(
    r"""(?ix)
    \b((?:pin|pin\ code|pin\ number|passcode|security\ code|unlock\ code|cvv|cvc|cvv2)
     (?:\s+(?:for|to|of|on)\s+(?:the\ |my\ |our\ )?[\w\-]+(?:\s+[\w\-]+)?)?
     \s*(?:\bis\b|\bwas\b|:|=|-|\#)?\s*)
    (\d(?:[\s\-]?\d){2,9})\b
    """
)
#: A 40-character AWS secret access key written anywhere (prose included): base64
#: alphabet, mixed case and at least one digit or ``/``/``+`` (so words and hex SHAs pass).
_AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])"
    r"(?=[A-Za-z0-9/+]*[0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)


# ---------------------------------------------------------------------------------------
# Passwords in prose in other languages, command lines, .netrc, query strings, hashes.

#: "password" in the languages people write notes in (lower case; matched case-folded).
_PASSWORD_WORDS = (
    "passwort", "kennwort", "zugangscode", "mot de passe", "mdp", "contraseña", "contrasena",
    "clave", "senha", "palavra-passe", "parola d'ordine", "wachtwoord", "hasło", "haslo",
    "heslo", "jelszó", "lösenord", "adgangskode", "passord", "salasana", "parola", "şifre",
    "sifre", "пароль", "паролата", "κωδικός", "סיסמה", "كلمة المرور", "كلمة السر",
    "पासवर्ड", "mật khẩu", "kata sandi", "kata laluan", "รหัสผ่าน", "密码", "密碼", "口令",
    "パスワード", "暗証番号", "비밀번호", "암호", "패스워드", "password", "passwd", "pw",
)
#: Little words between "password" and its value: possessives, "for the X", "is", ":".
_CONNECTOR = (
    r"(?:[ \t]+(?:is|was|ist|lautet|war|est|était|es|era|é|è|to|jest|это|был|е|är|er|on"
    r"|olan|adalah|là|ialah)(?!\w)|[ \t]*(?:=|:|：|[-—–](?=\s)|是|为|為|は|が|는|은|이|가|है))+"
)
#: Scripts without spaces between words: no word boundary before "password" there.
_SPACELESS = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_WORLD_PROSE = re.compile(
    rf"""(?ix)
    ((?:(?<![\w])(?:{"|".join(re.escape(w) for w in _PASSWORD_WORDS if not _SPACELESS.search(w))})
        (?:m|en|et|s|es|u|a|e)?
      |(?:{"|".join(re.escape(w) for w in _PASSWORD_WORDS if _SPACELESS.search(w))})))
    # "for the NAS" then a connector, or a connector, or (a made-up value only) nothing
    ((?:[ \t]+(?:for|für|pour|para|per|voor|dla|для|of|de|du|del|van|von|on|to|zu)[ \t]+
        (?:the\ |my\ |our\ |die\ |der\ |das\ |den\ |le\ |la\ |les\ |el\ |mein\ |meine\ )?
        [\w.@\-]*\w{_CONNECTOR}[ \t]*)
     |{_CONNECTOR}[ \t]*|[ \t]*)
    (["'`«“„「『]?)([^\s"'`»”“」』，。、]+)
    """
)
#: The gate of that rule: ASCII stems that every ASCII word above contains, then (only for
#: a text that is not all ASCII) the others.
_PASSWORD_ASCII = (
    "pass", "pw", "mdp", "kennwort", "zugangscode", "contrasena", "clave", "senha", "parola",
    "wachtwoord", "haslo", "heslo", "salasana", "sifre", "kata sandi", "kata laluan",
    "adgangskode",
)
_PASSWORD_OTHER = tuple(w for w in _PASSWORD_WORDS if not w.isascii())
#: Without a connector word ("пароль qwerty123") only a value that looks made up (a
#: digit or a sign in it) is hidden, so "password reset" and "Passwort vergessen" stay.
_MADE_UP = re.compile(r"[\d\W_]")

#: ``curl -u user:pass``, ``--user user:pass``, ``-U``/``--proxy-user`` too.
_CLI_USERPASS = re.compile(
    r"""(?x)((?<!\S)(?:-u|-U|--user|--proxy-user)(?:\s+|=)["']?[^\s:"']*:)([^\s"']+)"""
)
#: ``--password=X``, ``--password X``, ``--passwd``, ``--pass``, ``--token X``, ``--secret``.
_CLI_FLAG = re.compile(
    r"""(?x)((?<!\S)--?(?:[\w\-]*?(?:password|passwd|pass|pwd|token|secret|api-?key|auth-key))
    (?:[ \t]+(?!-)|=))(["']?)((?<=")[^"\n]+(?=")|(?<=')[^'\n]+(?=')|[^\s"']+)"""
)
#: ``mysql -pSECRET``, ``mysql -p'SECRET'`` (the value sticks to ``-p``).
_MYSQL_P = re.compile(
    r"""(?x)(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b[^\n|;&]*?
    (?<!\S)-p)(["']?)((?<=")[^"\n]+(?=")|(?<=')[^'\n]+(?=')|[^\s"']+)"""
)
#: ``sshpass -p X``, ``docker login -p X`` and friends, where ``-p`` is a password.
_P_FLAG = re.compile(
    r"""(?x)(\b(?:sshpass|(?:docker|podman|buildah|helm\ registry|skopeo|oras|nerdctl)\s+login)
    \b[^\n|;&]*?(?<!\S)-p\s+)(["']?)((?<=")[^"\n]+(?=")|(?<=')[^'\n]+(?=')|[^\s"']+)"""
)
#: ``.netrc``: ``machine H login U password P`` (also on several lines).
_NETRC = re.compile(r"(?i)(\b(?:login|user)\s+\S+\s+password\s+)(\S+)")
#: Query strings: ``?key=``, ``&access_token=``, ``&sig=`` and other secret names.
_QUERY = re.compile(
    r"(?i)([?&;](?:key|apikey|api_key|api-key|access_token|id_token|refresh_token|token|"
    r"auth|sig|signature|secret|client_secret|password|passwd|pass|pwd|pw|code_verifier)=)"
    r"([^&#\s\"'<>]+)"
)
#: PowerShell's ``ConvertTo-SecureString 'X' -AsPlainText``: the plain text is the secret.
_PS_PLAIN = re.compile(r"(?i)(ConvertTo-SecureString\s+(?:-String\s+)?)([\"'])(.*?)\2")
#: ``Authorization:`` headers: whatever follows the scheme is the credential.
_AUTHZ = re.compile(
    r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:[a-z][\w\-]*\s+)?)([^\s\"'][^\n\"']*)"
)
#: crypt(3) and htpasswd hashes: crackable, so not to be kept either.
_HASH = re.compile(r"\$(?:apr1|2[abxy]|1|5|6|y|gy|7|argon2(?:id|i|d))\$[^\s:\"']{8,}")
#: ``Cookie:`` and ``Set-Cookie:`` headers carry sessions: hidden to the line end.
_COOKIE = re.compile(r"(?i)(\b(?:set-)?cookie\s*:\s*)([^\n]*=[^\n]*)")


_NAME_WORDS = ("key", "secret", "token", "pass", "pwd", "credential", "auth", "sig")
_PROSE_WORDS = (
    "pass", "pwd", "secret", "api key", "access key", "security answer", "recovery code",
    "seed phrase", "mnemonic",
)
_PIN_WORDS = ("pin", "passcode", "security code", "unlock code", "cvv", "cvc")
#: A run of 40 key characters: only then can an AWS secret key be present.
_LONG_RUN = re.compile(r"[A-Za-z0-9/+]{40}")


def _has(text: str, words: Iterable[str]) -> bool:
    return any(map(text.__contains__, words))  # C-level loop: the gates run on every text


def _sub_rules(text: str) -> str:
    # Literal gates first: most messages hold no secret and skip nearly every regex.
    for triggers, pattern in _TOKEN_RULES:
        if _has(text, triggers):
            text = pattern.sub(REDACTED, text)
    lower = text.lower()
    if ":/" in text and "@" in text:  # one slash too: a path normaliser folds "//"
        text = _URL_USERINFO.sub(rf"\1:{REDACTED}@", text)
    if _has(lower, ("bearer", "basic", "token", "digest")):
        text = _AUTH_HEADER.sub(rf"\1 {REDACTED}", text)
    has_assign = "=" in text or ":" in text
    if has_assign and _has(lower, ("key", "password", "pwd", "signature")):
        text = _CONN_STRING.sub(rf"\1={REDACTED}", text)
    if _has(lower, ("phrase", "mnemonic")):
        text = _PROSE_PHRASE.sub(rf"\1{REDACTED}", text)
    if has_assign and _has(lower, _NAME_WORDS):
        text = _ASSIGNMENT.sub(rf"\1\2{REDACTED}\4", text)
    if _has(lower, _PROSE_WORDS):
        text = _PROSE_SECRET.sub(_keep_redacted(rf"\1\2\3{REDACTED}"), text)
    if _has(lower, _PIN_WORDS):
        text = _PIN.sub(rf"\1{REDACTED}", text)
    if _LONG_RUN.search(text):
        text = _AWS_SECRET.sub(REDACTED, text)
    return _sub_more_rules(text, lower)


def _sub_more_rules(text: str, lower: str) -> str:
    """Command lines, ``.netrc``, query strings, hashes, cookies, other languages."""
    if "-" in text:
        if "-u" in text or "-U" in text or "--user" in text or "--proxy-user" in text:
            text = _CLI_USERPASS.sub(rf"\1{REDACTED}", text)
        if _has(lower, ("pass", "pwd", "token", "secret", "key")):
            text = _CLI_FLAG.sub(_keep(3, rf"\1\2{REDACTED}"), text)
        if "-p" in text:
            if _has(lower, ("mysql", "mariadb")):
                text = _MYSQL_P.sub(_keep(3, rf"\1\2{REDACTED}"), text)
            if _has(lower, ("sshpass", "login")):
                text = _P_FLAG.sub(_keep(3, rf"\1\2{REDACTED}"), text)
    if "password" in lower and ("login" in lower or "user" in lower):
        text = _NETRC.sub(_keep(2, rf"\1{REDACTED}"), text)
    if "=" in text and ("?" in text or "&" in text):
        text = _QUERY.sub(_keep(2, rf"\1{REDACTED}"), text)
    if "$" in text:
        text = _HASH.sub(REDACTED, text)
    if "authorization" in lower:
        text = _AUTHZ.sub(_keep(2, rf"\1{REDACTED}"), text)
    if "convertto-securestring" in lower:
        text = _PS_PLAIN.sub(rf"\1\2{REDACTED}\2", text)
    if "cookie" in lower:
        text = _COOKIE.sub(rf"\1{REDACTED}", text)
    if _has(lower, _PASSWORD_ASCII) or (not lower.isascii() and _has(lower, _PASSWORD_OTHER)):
        text = _WORLD_PROSE.sub(_world_value, text)
    return text


def _keep(group: int, template: str) -> Callable[[re.Match[str]], str]:
    """A replacement that leaves an already redacted value (group ``group``) alone."""

    def repl(m: re.Match[str]) -> str:
        if m.group(group).startswith(REDACTED):
            return m.group(0)
        return m.expand(template)

    return repl


def _world_value(m: re.Match[str]) -> str:
    """Hide the value after "password" (any language) unless it is plainly a word."""
    value = m.group(4)
    if value.startswith(REDACTED) or REDACTED in value:
        return m.group(0)
    if not m.group(2).strip() and (not _MADE_UP.search(value) or value.startswith("-")):
        return m.group(0)  # "password reset", "Passwort vergessen", "--no-password -h"
    return m.group(1) + _hide_made_up_thing(m.group(2)) + m.group(3) + REDACTED


#: The "X" of "password to X:" ("for the NAS", "to kotek12"): a preposition, an optional
#: article, then the thing.
_FOR_THING = re.compile(r"(?i)^([ \t]+\S+[ \t]+(?:\S+[ \t])??)([\w.@\-]*\w)(?=\W)")


def _hide_made_up_thing(phrase: str) -> str:
    """In "hasło to kotek12: ..." the preposition reading ("password to <thing>:") and the
    connector reading ("password is kotek12") overlap: a thing that looks made up (a digit
    or a sign in it, as in a password) is hidden too, so either reading leaks nothing."""
    m = _FOR_THING.match(phrase)
    if m is None or not _MADE_UP.search(m.group(2).replace(".", "")):
        return phrase
    return m.group(1) + REDACTED + phrase[m.end() :]


def _keep_redacted(template: str) -> Callable[[re.Match[str]], str]:
    """A replacement that leaves an already redacted value alone (idempotence)."""

    def repl(m: re.Match[str]) -> str:
        if m.group(4).startswith(REDACTED):
            return m.group(0)
        return m.expand(template)

    return repl


# ---------------------------------------------------------------------------------------
# detect-secrets (Yelp), when installed: its maintained regex plugins add what ours lack.

#: Plugins left out: IP addresses are not secrets, entropy and keyword plugins are
#: built for source code and flag prose (ours cover keywords in prose).
_SKIPPED_PLUGINS = frozenset(
    {
        "IPPublicDetector",
        "KeywordDetector",
        "Base64HighEntropyString",
        "HexHighEntropyString",
    }
)


@dataclass
class _DetectSecrets:
    patterns: list[re.Pattern[str]] = field(default_factory=list)
    loaded: bool = False


_detect = _DetectSecrets()


def _detect_secrets_patterns() -> Sequence[re.Pattern[str]]:
    """The denylist regexes of detect-secrets' regex plugins ([] when not installed)."""
    if _detect.loaded:
        return _detect.patterns
    _detect.loaded = True
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector
    except ImportError:
        log.debug("detect-secrets not installed; built-in redaction rules only")
        return _detect.patterns
    plugins: dict[str, type] = get_mapping_from_secret_type_to_class()
    for cls in plugins.values():
        if cls.__name__ in _SKIPPED_PLUGINS or not issubclass(cls, RegexBasedDetector):
            continue
        denylist = getattr(cls, "denylist", ())
        if not isinstance(denylist, (tuple, list)):
            continue
        for pattern in denylist:
            if isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
                _detect.patterns.append(pattern)
    return _detect.patterns


#: detect-secrets' rules look for keys: long runs of key characters with a digit.
_KEYLIKE = re.compile(r"[A-Za-z0-9+/=_.\-]{10,}")


def _sub_detect_secrets(text: str) -> str:
    if not any(any(c.isdigit() for c in m.group()) for m in _KEYLIKE.finditer(text)):
        return text
    for pattern in _detect_secrets_patterns():
        text = pattern.sub(_replace_secret_group, text)
    return text


def _replace_secret_group(m: re.Match[str]) -> str:
    """Replace the captured secret (the last non-empty group) or the whole match."""
    whole = m.group(0)
    for i in range(m.re.groups, 0, -1):
        value = m.group(i)
        if value and len(value) >= 4 and REDACTED not in value:
            start, end = m.start(i) - m.start(0), m.end(i) - m.start(0)
            return whole[:start] + REDACTED + whole[end:]
    return whole if REDACTED in whole else REDACTED


# ---------------------------------------------------------------------------------------
# Public API


def redact_secrets(text: str) -> str:
    """Replace credentials in ``text`` with ``[REDACTED]``.

    Covers private key blocks (PEM, PGP, OpenSSH; across lines, and an unterminated
    block to the end of the text), provider tokens (OpenAI, Anthropic, Google, GitHub,
    GitLab, AWS, Slack and its webhooks, Stripe, SendGrid, Twilio, npm, PyPI, Hugging
    Face, Telegram, JWTs and more), ``Bearer``/``Basic`` credentials, ``key=value``
    assignments with a secret-looking name, connection strings (``AccountKey=``,
    ``Password=``), passwords in URLs, AWS secret keys in prose, and prose such as
    "my password is ...", "passphrase: ..." and PINs. When the ``detect-secrets``
    package is installed its regex plugins run too. Redaction errs on the side of
    hiding: it is idempotent and never reveals more than its input.
    """
    if not text:
        return text
    out, _open = _redact_blocks(text, False)
    return _sub_detect_secrets(_sub_rules(out))


@dataclass
class StreamRedactor:
    """Redacts a sequence of messages, carrying an open private key block across them.

    A key pasted over two messages (BEGIN in one, END in the next) is hidden whole:
    every message after an unterminated BEGIN is redacted up to the END marker.
    """

    in_block: bool = False

    def redact(self, text: str) -> str:
        """Redact one message (see :func:`redact_secrets`), updating the block state."""
        if not text:
            return text
        out, self.in_block = _redact_blocks(text, self.in_block)
        return _sub_detect_secrets(_sub_rules(out))


def redact_all(texts: Iterable[str]) -> list[str]:
    """Redact messages in order with one :class:`StreamRedactor`."""
    stream = StreamRedactor()
    return [stream.redact(t) for t in texts]


def redact_json(value: Any, stream: StreamRedactor | None = None) -> Any:
    """``value`` with every string inside it redacted (dict keys kept), for JSON records.

    Message content may be a string or a list of content blocks; tool calls carry their
    arguments as nested objects or as JSON text: all of it passes the one rule set. A
    string under a key is redacted with its key as context (``{"password": "x"}`` is
    judged as ``password=x``), so parsed JSON loses no rule that its text would match.
    """
    stream = stream or StreamRedactor()
    if isinstance(value, str):
        if value[:1] in ("{", "["):  # tool-call arguments or payloads sent as JSON text
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                pass
            else:
                if isinstance(parsed, (dict, list)):
                    return json.dumps(redact_json(parsed, stream), ensure_ascii=False)
        return stream.redact(value)
    if isinstance(value, Mapping):
        return {k: _redact_under(str(k), v, stream) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_json(v, stream) for v in value]
    return value


def _redact_under(key: str, value: Any, stream: StreamRedactor) -> Any:
    """A mapping's value redacted with its key as context (see :func:`redact_json`)."""
    if not isinstance(value, str) or value[:1] in ("{", "["):
        return redact_json(value, stream)
    pair = f"{key}={value}"
    judged = stream.redact(pair)
    if judged != pair and judged.startswith(f"{key}="):
        return stream.redact(judged[len(key) + 1 :])
    return stream.redact(value)


def redact_value(value: object) -> str:
    """``repr``-safe text of a value that may hold a secret (errors, config values)."""
    return redact_secrets(str(value))


# ---------------------------------------------------------------------------------------
# Connection strings (DSNs) shown in reprs, status and errors.

#: What a DSN's password is shown as (the same marker as every other redaction).
MASK = REDACTED
#: ``scheme://`` then the userinfo, which runs to the last ``@`` of the token: a raw
#: ``@``, ``:`` or ``/`` in a password (a DSN the driver will misread) is still inside it.
_DSN_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)(\S*@)?")
#: ``password=...`` in a libpq key=value DSN: quoted (with backslash escapes) or a word.
_DSN_KV_PASSWORD = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s'&]*)")


def _dsn_url_parts(dsn: str) -> tuple[str, str, str] | None:
    """``(scheme://user, password, rest)`` of a URL DSN with a password, else None."""
    m = _DSN_URL.search(dsn)
    if m is None or not m.group(2):
        return None
    userinfo = m.group(2)[:-1]
    user, colon, password = userinfo.partition(":")
    if not colon:
        return None
    return dsn[: m.start(2)] + user, password, dsn[m.end(2) - 1 :]


def dsn_passwords(dsn: str | None) -> tuple[str, ...]:
    """The password(s) written in ``dsn`` (raw and percent-decoded), to hide in errors."""
    if not dsn:
        return ()
    from urllib.parse import unquote

    found: list[str] = []
    parts = _dsn_url_parts(dsn)
    if parts is not None:
        found.append(parts[1])
    for m in _DSN_KV_PASSWORD.finditer(dsn):
        value = m.group(2)
        if value.startswith("'"):
            value = value[1:-1] if len(value) > 1 and value.endswith("'") else value[1:]
            found.append(re.sub(r"\\(.)", r"\1", value))
        found.append(value)
    out = {v for p in found for v in (p, unquote(p)) if v}
    # A password the driver misreads (a raw "@" or "/" in a URL) may show up in pieces.
    out |= {piece for p in found for piece in re.split(r"[@/:?#&=\s]+", p) if len(piece) >= 4}
    return tuple(sorted(out, key=len, reverse=True))


def dsn_is_ambiguous(dsn: str | None) -> bool:
    """True when a URL DSN's password holds a raw ``@`` or ``/``: drivers split it at the
    wrong place (part of the password becomes the host), so it must be percent-encoded."""
    parts = _dsn_url_parts(dsn or "")
    return parts is not None and ("@" in parts[1] or "/" in parts[1])


def mask_dsn(dsn: str | None) -> str | None:
    """``dsn`` with its password shown as ``***``: the one masking function for DSNs and
    URLs in reprs, status, logs and errors.

    URL form (``postgresql://user:pass@host/db``, the password running to the last ``@``
    so a raw ``@``/``:``/``/`` is masked whole), libpq key=value form (``password=...``,
    quoted or not) and secret query parameters (``?password=``, ``?sslpassword=``,
    ``?token=``); any other credential shape :func:`redact_secrets` knows is hidden too.
    """
    if not dsn:
        return dsn
    hole = "\ue000"  # a private-use character stands for the password meanwhile

    def rest(text: str) -> str:
        text = _DSN_KV_PASSWORD.sub(lambda m: m.group(1) + hole, text.replace(hole, ""))
        text = re.sub(r"(?i)([?&](?:ssl)?password=)[^&#\s]*", rf"\1{hole}", text)
        return redact_secrets(text).replace(hole, MASK)

    parts = _dsn_url_parts(dsn)
    if parts is None:
        return rest(dsn)
    # Each side of the password on its own: a user named "token" must not make the
    # password's mask look like "token: value" and swallow the host with it.
    return f"{redact_secrets(parts[0])}:{MASK}{rest(parts[2])}"


def redact_error(text: str, *, dsn: str | None = None) -> str:
    """Error text for messages and logs: :func:`redact_secrets`, and every password
    written in ``dsn`` (raw, percent-decoded, and the pieces a driver shows when it
    misreads a raw ``@``) replaced by ``***``."""
    for secret in dsn_passwords(dsn):
        text = text.replace(secret, MASK)
    return redact_secrets(text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from messages, arguments and tracebacks.

    Attach it to a handler (``handler.addFilter(RedactingFilter())``) to scrub every
    record that handler emits; memmw's own CLI logging can use it the same way.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; never drops it."""
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the caller's bug; leave it
            return True
        clean = redact_secrets(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact_secrets(formatted)
        return True
