// `shaperctl exporter --web-config FILE`: the web configuration file of Prometheus exporters
// (exporter-toolkit's YAML format): TLS with a certificate and key, optionally client
// certificates checked against a CA, and basic-auth users with bcrypt hashes.
#pragma once

#include <openssl/ssl.h>

#include <map>
#include <memory>
#include <string>

namespace shaperctl {

struct SslContextFree {
    void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using SslContext = std::unique_ptr<SSL_CTX, SslContextFree>;

struct WebConfig {
    SslContext tls;                             // null: plain HTTP
    std::map<std::string, std::string> users;  // name -> bcrypt hash; empty: no authentication
};

// Reads and checks FILE, and loads the certificates and keys it names (relative paths are
// relative to FILE's directory). Error, one line naming FILE and the field: "web.yml:
// tls_server_config.cert_file: cannot read /x: No such file or directory".
WebConfig load_web_config(const std::string& path);

// Whether `password` matches the bcrypt `hash` ($2a$, $2b$ or $2y$; libxcrypt). Slow by design:
// tens of milliseconds at cost 10.
bool bcrypt_matches(const std::string& password, const std::string& hash);

}  // namespace shaperctl
