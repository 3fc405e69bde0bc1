"""Authentication the Pulsar way, shared by the broker, the admin HTTP server and the tools.

``tokens`` (JWT: HS256 secret keys, RS256/ES256 key pairs, ``pulsar tokens``' key formats),
``htpasswd`` (basic auth files), ``providers`` (the ``token`` / ``basic`` / ``tls``
authentication providers and the service that picks one per connection or request),
``tls`` (server and client SSL contexts that reload their files), ``errors`` (one hierarchy).
Nothing here knows about topics or tenants: authorization lives in the broker.
"""
