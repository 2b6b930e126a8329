"""A tiny, real OpenID Connect provider on 127.0.0.1 for the sign-in tests.

It serves discovery (``/.well-known/openid-configuration``), an authorization endpoint that signs the
configured person in at once (no login form) and sends the browser back to the ``redirect_uri`` with a
code, a token endpoint that checks the client's credentials, the code and its PKCE verifier and answers
with an RS256-signed ID token carrying the request's nonce, and the JWKS to verify it. Every request is
recorded, so a test can assert what Streamlit's ``st.login`` sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    nonce: str | None
    challenge: str | None


@dataclass
class OidcProvider:
    client_id: str
    client_secret: str
    email: str
    name: str = "Test Person"
    requests: list[tuple[str, str, dict]] = field(default_factory=list)  # (method, path, params)
    grants: dict[str, Grant] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from joserfc.jwk import RSAKey

        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig", "alg": "RS256"})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.metadata_url = f"{self.base}/.well-known/openid-configuration"

    def __enter__(self) -> OidcProvider:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def seen(self, path: str) -> list[dict]:
        return [params for _, p, params in self.requests if p == path]

    # ------------------------------------------------------------------------------------------ endpoints

    def metadata(self) -> dict:
        return {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "jwks_uri": f"{self.base}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["openid", "email", "profile"],
        }

    def authorize(self, q: dict) -> tuple[int, dict, bytes]:
        code = secrets.token_urlsafe(16)
        self.grants[code] = Grant(q.get("client_id", ""), q.get("redirect_uri", ""), q.get("nonce"),
                                  q.get("code_challenge"))
        back = f"{q.get('redirect_uri')}?{urlencode({'code': code, 'state': q.get('state', '')})}"
        return 302, {"Location": back}, b""

    def token(self, form: dict, auth_header: str | None) -> tuple[int, dict, bytes]:
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        if auth_header and auth_header.startswith("Basic "):
            client_id, _, client_secret = base64.b64decode(auth_header[6:]).decode().partition(":")
        grant = self.grants.pop(form.get("code", ""), None)
        if (client_id, client_secret) != (self.client_id, self.client_secret) or grant is None:
            return 400, {"Content-Type": "application/json"}, b'{"error": "invalid_grant"}'
        if grant.redirect_uri != form.get("redirect_uri") or grant.client_id != client_id:
            return 400, {"Content-Type": "application/json"}, b'{"error": "invalid_grant"}'
        if grant.challenge:
            verifier = form.get("code_verifier", "").encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if digest != grant.challenge:
                return 400, {"Content-Type": "application/json"}, b'{"error": "invalid_grant"}'
        from joserfc import jwt

        now = int(time.time())
        claims = {"iss": self.base, "sub": "user-1", "aud": self.client_id, "iat": now, "exp": now + 600,
                  "email": self.email, "email_verified": True, "name": self.name}
        if grant.nonce:
            claims["nonce"] = grant.nonce
        id_token = jwt.encode({"alg": "RS256", "kid": "test-key"}, claims, self.key)
        body = {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer", "expires_in": 600,
                "id_token": id_token}
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()

    def _handler(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, headers: dict, body: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                provider.requests.append(("GET", url.path, q))
                if url.path == "/.well-known/openid-configuration":
                    self._send(200, {"Content-Type": "application/json"}, json.dumps(provider.metadata()).encode())
                elif url.path == "/jwks":
                    keys = {"keys": [provider.key.as_dict(private=False)]}
                    self._send(200, {"Content-Type": "application/json"}, json.dumps(keys).encode())
                elif url.path == "/authorize":
                    self._send(*provider.authorize(q))
                else:
                    self._send(404, {}, b"")

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                form = {k: v[0] for k, v in parse_qs(raw).items()}
                provider.requests.append(("POST", url.path, form))
                if url.path == "/token":
                    self._send(*provider.token(form, self.headers.get("Authorization")))
                else:
                    self._send(404, {}, b"")

        return Handler
