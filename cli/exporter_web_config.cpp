#include "exporter_web_config.h"

#include <crypt.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "loader/fd.h"

namespace shaperctl {
namespace {

class Checker {
public:
    explicit Checker(std::string file) : file_(std::move(file)) {}

    [[noreturn]] void fail(const std::string& field, const std::string& what) const
    {
        throw Error(file_ + ": " + (field.empty() ? "" : field + ": ") + what);
    }

    // The keys of `map` must be known; those of the format shaperctl does not implement are
    // refused by name (ignoring one could serve more than its author meant to).
    void keys(const YAML::Node& map, const std::string& prefix, const std::vector<std::string>& known,
              const std::vector<std::string>& unsupported = {}) const
    {
        if (!map.IsMap())
            fail(prefix, "expected a mapping");
        for (const auto& entry : map) {
            const std::string key = entry.first.as<std::string>();
            const std::string field = prefix.empty() ? key : prefix + "." + key;
            if (std::find(unsupported.begin(), unsupported.end(), key) != unsupported.end())
                fail(field, "not supported by shaperctl");
            if (std::find(known.begin(), known.end(), key) == known.end())
                fail(field, "unknown field");
        }
    }

    std::string string(const YAML::Node& node, const std::string& field) const
    {
        if (!node)
            return "";
        if (!node.IsScalar())
            fail(field, "expected a string");
        return node.Scalar();
    }

    // A file the config names: relative to the config's directory; readable, or Error with
    // the reason.
    std::string readable(const YAML::Node& node, const std::string& field) const
    {
        std::string path = string(node, field);
        if (path.empty())
            return path;
        if (path[0] != '/' && file_.find('/') != std::string::npos)
            path = file_.substr(0, file_.rfind('/') + 1) + path;
        if (!Fd(open(path.c_str(), O_RDONLY | O_CLOEXEC)))
            fail(field, errno_message("cannot read " + path, errno));
        return path;
    }

private:
    std::string file_;
};

// exporter-toolkit's names for Go's tls.ClientAuthType.
struct ClientAuth {
    const char* name;
    bool request, require, verify;
};
constexpr ClientAuth kClientAuth[] = {
    {"NoClientCert", false, false, false},
    {"RequestClientCert", true, false, false},
    {"RequireAnyClientCert", true, true, false},
    {"VerifyClientCertIfGiven", true, false, true},
    {"RequireAndVerifyClientCert", true, true, true},
};

int tls_version(const Checker& check, const std::string& name, const std::string& field)
{
    static const std::map<std::string, int> versions = {
        {"TLS10", TLS1_VERSION}, {"TLS11", TLS1_1_VERSION}, {"TLS12", TLS1_2_VERSION}, {"TLS13", TLS1_3_VERSION}};
    const auto it = versions.find(name);
    if (it == versions.end())
        check.fail(field, "unknown \"" + name + "\" (TLS10, TLS11, TLS12 or TLS13)");
    return it->second;
}

// A certificate that did not verify is accepted: the *Any* and Request modes ask for one only.
int accept_any_certificate(int, X509_STORE_CTX*)
{
    return 1;
}

SslContext tls_context(const Checker& check, const YAML::Node& tls)
{
    const std::string p = "tls_server_config";
    check.keys(tls, p,
               {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version",
                "prefer_server_cipher_suites"},
               {"cert", "key", "client_ca", "cipher_suites", "curve_preferences", "client_allowed_sans"});
    const std::string cert = check.readable(tls["cert_file"], p + ".cert_file");
    const std::string key = check.readable(tls["key_file"], p + ".key_file");
    if (cert.empty() && key.empty())
        return nullptr;  // exporter-toolkit: TLS off
    if (cert.empty())
        check.fail(p + ".cert_file", "missing (key_file is given)");
    if (key.empty())
        check.fail(p + ".key_file", "missing (cert_file is given)");

    SslContext ctx(SSL_CTX_new(TLS_server_method()));
    if (!ctx)
        check.fail(p, "OpenSSL cannot create a TLS context");
    const std::string min = check.string(tls["min_version"], p + ".min_version");
    const std::string max = check.string(tls["max_version"], p + ".max_version");
    SSL_CTX_set_min_proto_version(ctx.get(), min.empty() ? TLS1_2_VERSION : tls_version(check, min, p + ".min_version"));
    if (!max.empty())
        SSL_CTX_set_max_proto_version(ctx.get(), tls_version(check, max, p + ".max_version"));
    SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    // Idle connections give their buffers back; writes of a long response go out piecewise.
    SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                                    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert.c_str()) != 1)
        check.fail(p + ".cert_file", cert + ": not a PEM certificate");
    std::unique_ptr<FILE, int (*)(FILE*)> key_stream(std::fopen(key.c_str(), "re"), std::fclose);
    std::unique_ptr<EVP_PKEY, void (*)(EVP_PKEY*)> pkey(
        key_stream ? PEM_read_PrivateKey(key_stream.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
    if (!pkey)
        check.fail(p + ".key_file", key + ": not a PEM private key (without a passphrase)");
    if (SSL_CTX_use_PrivateKey(ctx.get(), pkey.get()) != 1 || SSL_CTX_check_private_key(ctx.get()) != 1)
        check.fail(p + ".key_file", key + ": does not match the certificate of cert_file");

    const std::string auth_name = check.string(tls["client_auth_type"], p + ".client_auth_type");
    const ClientAuth* auth = &kClientAuth[0];
    if (!auth_name.empty()) {
        auth = nullptr;
        for (const ClientAuth& a : kClientAuth)
            if (auth_name == a.name)
                auth = &a;
        if (!auth)
            check.fail(p + ".client_auth_type",
                       "unknown \"" + auth_name + "\" (NoClientCert, RequestClientCert, RequireAnyClientCert, "
                       "VerifyClientCertIfGiven or RequireAndVerifyClientCert)");
    }
    const std::string ca = check.readable(tls["client_ca_file"], p + ".client_ca_file");
    if (!ca.empty() && !auth->request)
        check.fail(p + ".client_ca_file", "given, but client_auth_type asks for no client certificate");
    if (ca.empty() && auth->verify)
        check.fail(p + ".client_ca_file", "missing (client_auth_type " + auth_name + " verifies against it)");
    if (!ca.empty()) {
        STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca.c_str());
        if (!names)
            check.fail(p + ".client_ca_file", ca + ": not a PEM certificate");
        SSL_CTX_set_client_CA_list(ctx.get(), names);  // the context owns them from here
        if (SSL_CTX_load_verify_locations(ctx.get(), ca.c_str(), nullptr) != 1)
            check.fail(p + ".client_ca_file", ca + ": not a PEM certificate");
    }
    if (auth->request) {
        const int mode = SSL_VERIFY_PEER | (auth->require ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
        SSL_CTX_set_verify(ctx.get(), mode, auth->verify ? nullptr : accept_any_certificate);
        // Resumed sessions keep the verified client: OpenSSL wants a context to bind them to.
        static const unsigned char session_context[] = "shaperctl-exporter";
        SSL_CTX_set_session_id_context(ctx.get(), session_context, sizeof session_context - 1);
    }
    ERR_clear_error();
    return ctx;
}

}  // namespace

WebConfig load_web_config(const std::string& path)
{
    const Checker check(path);
    std::ifstream in(path);
    if (!in)
        check.fail("", errno_message("cannot read", errno));
    std::stringstream text;
    text << in.rdbuf();
    YAML::Node root;
    try {
        root = YAML::Load(text.str());
    } catch (const YAML::Exception& e) {
        check.fail("line " + std::to_string(e.mark.line + 1), e.msg);
    }
    WebConfig config;
    if (root.IsNull())
        return config;  // an empty file: plain HTTP, no users
    check.keys(root, "", {"tls_server_config", "http_server_config", "basic_auth_users"});
    if (const YAML::Node tls = root["tls_server_config"]; tls && !tls.IsNull())
        config.tls = tls_context(check, tls);
    if (const YAML::Node http = root["http_server_config"]; http && !http.IsNull())
        check.keys(http, "http_server_config", {"http2"}, {"headers"});  // HTTP/1.1 only: http2 is moot
    if (const YAML::Node users = root["basic_auth_users"]; users && !users.IsNull()) {
        if (!users.IsMap())
            check.fail("basic_auth_users", "expected a mapping of user names to bcrypt hashes");
        static const std::regex bcrypt(R"(\$2[aby]\$[0-9]{2}\$[./A-Za-z0-9]{53})");
        for (const auto& entry : users) {
            const std::string name = entry.first.as<std::string>();
            const std::string field = "basic_auth_users." + name;
            if (name.empty() || name.find(':') != std::string::npos)
                check.fail(field, "a user name is not empty and has no ':'");
            const std::string hash = check.string(entry.second, field);
            if (!std::regex_match(hash, bcrypt))
                check.fail(field, "not a bcrypt hash ($2y$10$ and 53 characters, e.g. from htpasswd -nBC 10)");
            config.users[name] = hash;
        }
    }
    return config;
}

bool bcrypt_matches(const std::string& password, const std::string& hash)
{
    auto data = std::make_unique<crypt_data>();  // 32 kB: not on the stack
    const char* out = crypt_rn(password.c_str(), hash.c_str(), data.get(), sizeof *data);
    return out && std::strlen(out) == hash.size() && CRYPTO_memcmp(out, hash.data(), hash.size()) == 0;
}

}  // namespace shaperctl
