// OpenSSL's libcrypto (Debian's libssl-dev), for the signatures of end-user tokens: HMAC-SHA256,
// RSA PKCS #1 v1.5 with SHA-256, ECDSA P-256 with SHA-256, and SHA-256 itself. The helpers below
// only sequence OpenSSL's own calls (its parameter builders and function-like macros do not
// reach Swift); every cryptographic operation is OpenSSL's.
#include <stddef.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>

/* A public key from parameters: an RSA modulus and exponent, or a P-256 point. NULL on failure. */
static inline EVP_PKEY *counter_public_key_from_params(const char *type, OSSL_PARAM_BLD *builder) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(builder);
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params != NULL && context != NULL && EVP_PKEY_fromdata_init(context) == 1) {
        if (EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
    }
    EVP_PKEY_CTX_free(context);
    OSSL_PARAM_free(params);
    return key;
}

/* An RSA public key from its big-endian modulus and exponent (a JWK's "n" and "e"). */
static inline EVP_PKEY *counter_rsa_public_key(const unsigned char *n, size_t n_length,
                                               const unsigned char *e, size_t e_length) {
    EVP_PKEY *key = NULL;
    BIGNUM *modulus = BN_bin2bn(n, (int)n_length, NULL);
    BIGNUM *exponent = BN_bin2bn(e, (int)e_length, NULL);
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    if (modulus != NULL && exponent != NULL && builder != NULL &&
        OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_N, modulus) == 1 &&
        OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_E, exponent) == 1) {
        key = counter_public_key_from_params("RSA", builder);
    }
    OSSL_PARAM_BLD_free(builder);
    BN_free(modulus);
    BN_free(exponent);
    return key;
}

/* A P-256 public key from its uncompressed point (0x04 || x || y, from a JWK's "x" and "y").
   OpenSSL refuses a point that is not on the curve. */
static inline EVP_PKEY *counter_p256_public_key(const unsigned char *point, size_t length) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    if (builder != NULL &&
        OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
        OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, length) == 1) {
        key = counter_public_key_from_params("EC", builder);
    }
    OSSL_PARAM_BLD_free(builder);
    return key;
}

/* A public key from PEM text ("-----BEGIN PUBLIC KEY-----"). */
static inline EVP_PKEY *counter_public_key_from_pem(const char *pem, size_t length) {
    BIO *bio = BIO_new_mem_buf(pem, (int)length);
    if (bio == NULL) return NULL;
    EVP_PKEY *key = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    return key;
}

/* 1 when `signature` (DER for ECDSA, raw for RSA) is `key`'s SHA-256 signature of `message`. */
static inline int counter_verify_sha256(EVP_PKEY *key, const unsigned char *message, size_t message_length,
                                        const unsigned char *signature, size_t signature_length) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context == NULL) return 0;
    int verified = EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, key) == 1 &&
                   EVP_DigestVerify(context, signature, signature_length, message, message_length) == 1;
    EVP_MD_CTX_free(context);
    ERR_clear_error();
    return verified;
}

/* An ES256 signature as a JWT carries it (r || s, 32 bytes each) in DER, as OpenSSL verifies it.
   Returns the DER length written to `output` (at most 80 bytes), or 0. */
static inline int counter_ecdsa_raw_to_der(const unsigned char *raw, unsigned char *output, int capacity) {
    ECDSA_SIG *signature = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, 32, NULL);
    BIGNUM *s = BN_bin2bn(raw + 32, 32, NULL);
    int length = 0;
    if (signature != NULL && r != NULL && s != NULL && ECDSA_SIG_set0(signature, r, s) == 1) {
        r = NULL;
        s = NULL;
        if (i2d_ECDSA_SIG(signature, NULL) <= capacity) {
            unsigned char *cursor = output;
            length = i2d_ECDSA_SIG(signature, &cursor);
            if (length < 0) length = 0;
        }
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(signature);
    return length;
}

/* The other way, for signing: DER to r || s (64 bytes). Returns 1 on success. */
static inline int counter_ecdsa_der_to_raw(const unsigned char *der, long length, unsigned char *raw) {
    const unsigned char *cursor = der;
    ECDSA_SIG *signature = d2i_ECDSA_SIG(NULL, &cursor, length);
    if (signature == NULL) return 0;
    const BIGNUM *r = NULL;
    const BIGNUM *s = NULL;
    ECDSA_SIG_get0(signature, &r, &s);
    int ok = BN_bn2binpad(r, raw, 32) == 32 && BN_bn2binpad(s, raw + 32, 32) == 32;
    ECDSA_SIG_free(signature);
    return ok;
}

/* A new key pair: RSA of `bits`, or P-256 when `bits` is 0. For tests and the bench, which sign
   tokens the node then verifies. */
static inline EVP_PKEY *counter_generate_key(int bits) {
    if (bits == 0) return EVP_EC_gen("prime256v1");
    return EVP_RSA_gen((unsigned int)bits);
}

/* `key`'s SHA-256 signature of `message` (DER for ECDSA). Returns its length, or 0. */
static inline size_t counter_sign_sha256(EVP_PKEY *key, const unsigned char *message, size_t message_length,
                                         unsigned char *output, size_t capacity) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context == NULL) return 0;
    size_t length = capacity;
    if (EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(context, output, &length, message, message_length) != 1) {
        length = 0;
    }
    EVP_MD_CTX_free(context);
    return length;
}

/* An RSA key's modulus ("n") or public exponent ("e"), big-endian. Returns its length, or 0. */
static inline int counter_rsa_component(EVP_PKEY *key, const char *name, unsigned char *output, int capacity) {
    BIGNUM *value = NULL;
    if (EVP_PKEY_get_bn_param(key, name, &value) != 1) return 0;
    int length = BN_num_bytes(value) <= capacity ? BN_bn2bin(value, output) : 0;
    BN_free(value);
    return length;
}

/* A P-256 key's public point, uncompressed (65 bytes). Returns its length, or 0. */
static inline size_t counter_ec_public_point(EVP_PKEY *key, unsigned char *output, size_t capacity) {
    size_t length = 0;
    if (EVP_PKEY_set_utf8_string_param(key, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "uncompressed") != 1) return 0;
    if (EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, output, capacity, &length) != 1) return 0;
    return length;
}

/* `key`'s public half as PEM. Returns its length written to `output`, or 0. */
static inline size_t counter_public_key_pem(EVP_PKEY *key, char *output, size_t capacity) {
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio == NULL) return 0;
    size_t length = 0;
    if (PEM_write_bio_PUBKEY(bio, key) == 1) {
        char *data = NULL;
        long available = BIO_get_mem_data(bio, &data);
        if (available > 0 && (size_t)available <= capacity) {
            memcpy(output, data, (size_t)available);
            length = (size_t)available;
        }
    }
    BIO_free(bio);
    return length;
}
