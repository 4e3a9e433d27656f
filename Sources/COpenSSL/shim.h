#ifndef LATCHKEY_COPENSSL_SHIM_H
#define LATCHKEY_COPENSSL_SHIM_H
// Force the OpenSSL 3 EVP API: deprecated low-level calls do not compile.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

// Macros and type-generic stack helpers that Swift cannot call directly.
static inline void shim_OPENSSL_free(void *p) { OPENSSL_free(p); }
static inline STACK_OF(X509) *shim_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int shim_sk_X509_push(STACK_OF(X509) *s, X509 *x) { return sk_X509_push(s, x); }
static inline void shim_sk_X509_free(STACK_OF(X509) *s) { sk_X509_free(s); }
static inline void shim_sk_X509_pop_free(STACK_OF(X509) *s) { sk_X509_pop_free(s, X509_free); }
static inline int shim_sk_X509_num(const STACK_OF(X509) *s) { return sk_X509_num(s); }
static inline X509 *shim_sk_X509_value(const STACK_OF(X509) *s, int i) { return sk_X509_value(s, i); }
static inline int shim_sk_X509_CRL_push(STACK_OF(X509_CRL) *s, X509_CRL *c) { return sk_X509_CRL_push(s, c); }
static inline STACK_OF(X509_CRL) *shim_sk_X509_CRL_new_null(void) { return sk_X509_CRL_new_null(); }
static inline void shim_sk_X509_CRL_free(STACK_OF(X509_CRL) *s) { sk_X509_CRL_free(s); }
static inline int shim_set_pss_padding(EVP_PKEY_CTX *ctx) {
    return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) == 1
        && EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, RSA_PSS_SALTLEN_DIGEST) == 1;
}
static inline int shim_BIO_get_mem_data(BIO *b, char **pp) { return (int)BIO_get_mem_data(b, pp); }

// OSSL_PARAM arrays hold raw pointers to their key names and buffers for the duration of the
// call; building them here keeps those lifetimes obvious.
static inline EVP_PKEY *shim_pkey_from_ec_point(const char *group, const unsigned char *point, size_t length) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx == NULL) return NULL;
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM params[3];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)group, 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)point, length);
    params[2] = OSSL_PARAM_construct_end();
    if (EVP_PKEY_fromdata_init(ctx) != 1 || EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    return pkey;
}

/// Domain parameters only (the curve), as the template for `shim_pkey_from_ec_point_like`.
static inline EVP_PKEY *shim_pkey_ec_parameters(const char *group) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx == NULL) return NULL;
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM params[2];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)group, 0);
    params[1] = OSSL_PARAM_construct_end();
    if (EVP_PKEY_fromdata_init(ctx) != 1 || EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_KEY_PARAMETERS, params) != 1) pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    return pkey;
}

/// The same key as `shim_pkey_from_ec_point`, built by copying the curve from `parameters` and
/// setting the point (which OpenSSL checks is on the curve): about a third of the instructions of
/// EVP_PKEY_fromdata, which looks the curve up by name and builds its group anew for every key.
static inline EVP_PKEY *shim_pkey_from_ec_point_like(const EVP_PKEY *parameters, const unsigned char *point, size_t length) {
    EVP_PKEY *pkey = EVP_PKEY_new();
    if (pkey == NULL) return NULL;
    if (EVP_PKEY_copy_parameters(pkey, parameters) != 1 || EVP_PKEY_set1_encoded_public_key(pkey, point, length) != 1) {
        EVP_PKEY_free(pkey);
        return NULL;
    }
    return pkey;
}

static inline EVP_PKEY *shim_pkey_from_rsa(const unsigned char *n, size_t nlen, const unsigned char *e, size_t elen) {
    EVP_PKEY *pkey = NULL;
    BIGNUM *bn_n = BN_bin2bn(n, (int)nlen, NULL), *bn_e = BN_bin2bn(e, (int)elen, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    if (bn_n && bn_e && bld && ctx
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) == 1
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e) == 1
        && (params = OSSL_PARAM_BLD_to_param(bld)) != NULL
        && EVP_PKEY_fromdata_init(ctx) == 1) {
        if (EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) pkey = NULL;
    }
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    EVP_PKEY_CTX_free(ctx);
    BN_free(bn_n);
    BN_free(bn_e);
    return pkey;
}

static inline EVP_PKEY *shim_pkey_generate_ec(const char *group) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *pkey = NULL;
    if (ctx && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_CTX_set_group_name(ctx, group) == 1) {
        if (EVP_PKEY_generate(ctx, &pkey) != 1) pkey = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    return pkey;
}

static inline EVP_PKEY *shim_pkey_generate(const char *type, unsigned int rsa_bits) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    EVP_PKEY *pkey = NULL;
    if (ctx && EVP_PKEY_keygen_init(ctx) == 1
        && (rsa_bits == 0 || EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, (int)rsa_bits) == 1)) {
        if (EVP_PKEY_generate(ctx, &pkey) != 1) pkey = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    return pkey;
}

// Benchmark baseline: the same work as one assertion check (import the key from its raw
// components, then EVP_DigestVerify), in plain C with no Swift in between, so `latchkey bench`
// can report Latchkey's rate as a ratio of what OpenSSL alone achieves in the same run.
static inline int shim_baseline_verify(int kind, const char *group, const unsigned char *a, size_t alen,
                                       const unsigned char *b, size_t blen, const EVP_MD *md,
                                       const unsigned char *sig, size_t siglen,
                                       const unsigned char *msg, size_t msglen) {
    EVP_PKEY *pkey = NULL;
    if (kind == 0) pkey = shim_pkey_from_ec_point(group, a, alen);          /* EC: a = 04||x||y */
    else if (kind == 1) pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, a, alen);
    else pkey = shim_pkey_from_rsa(a, alen, b, blen);                     /* RSA: a = n, b = e */
    if (pkey == NULL) return -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = -1;
    if (ctx && EVP_DigestVerifyInit(ctx, NULL, md, NULL, pkey) == 1) rc = EVP_DigestVerify(ctx, sig, siglen, msg, msglen);
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    return rc;
}
#endif
