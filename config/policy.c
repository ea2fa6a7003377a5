/*
 * The policy part of a configuration, its canonical form and its digest;
 * see policy.h. Merging a policy over a host's config is config.c's
 * (config_with_policy), which loads the result exactly as a file.
 */
#include "config/policy.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "util/text.h"

const char *const config_policy_keys[] = {"default", "rules", "secrets", NULL};

int config_policy_extract(json_t **out, const json_t *root, rg_error *err)
{
    json_t *p = json_object(), *v;

    *out = NULL;
    if (p == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; config_policy_keys[i] != NULL; i++) {
        v = json_object_get(root, config_policy_keys[i]);
        if (v != NULL && json_object_set(p, config_policy_keys[i], v) < 0) {
            json_decref(p);
            return rg_error_set(err, -ENOMEM, "out of memory");
        }
    }
    *out = p;
    return 0;
}

int config_policy_is_key(const char *key)
{
    for (size_t i = 0; config_policy_keys[i] != NULL; i++)
        if (!strcmp(key, config_policy_keys[i]))
            return 1;
    return 0;
}

int config_policy_parse(json_t **out, const char *text, size_t len, const char *label,
                        rg_error *err)
{
    json_error_t jerr;
    json_t *root;
    const char *key;
    json_t *v;

    *out = NULL;
    if (len > CONFIG_POLICY_MAX_BYTES)
        return rg_error_set(err, RG_E_CONFIG, "%s: larger than %u bytes", label,
                            CONFIG_POLICY_MAX_BYTES);
    /* A repeated key would otherwise let the later value win unseen. */
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return rg_error_set(err, RG_E_CONFIG, "%s:%d:%d: invalid JSON: %s", label, jerr.line,
                            jerr.column, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return rg_error_set(err, RG_E_CONFIG, "%s: expected a JSON object", label);
    }
    json_object_foreach(root, key, v)
    {
        if (!config_policy_is_key(key)) {
            rg_error_set(err, RG_E_CONFIG,
                         "%s: unknown key \"%s\": a policy holds only " CONFIG_POLICY_KEYS_TEXT
                         " (the rest of a config is the host's)",
                         label, key);
            json_decref(root);
            return RG_E_CONFIG;
        }
    }
    *out = root;
    return 0;
}

int config_policy_canonical(char **out, size_t *len, const json_t *policy, rg_error *err)
{
    *out = json_dumps(policy, JSON_COMPACT | JSON_SORT_KEYS);
    if (*out == NULL)
        return rg_error_set(err, -ENOMEM, "cannot write the policy as JSON");
    *len = strlen(*out);
    return 0;
}

int config_policy_digest_bytes(char out[CONFIG_POLICY_DIGEST_SIZE], const void *canonical,
                               size_t len, rg_error *err)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (EVP_Digest(canonical, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
        return rg_error_set(err, -EIO, "cannot compute SHA-256");
    memcpy(out, "sha256:", 7);
    rg_hex_encode(out + 7, md, 32);
    return 0;
}

int config_policy_digest(char out[CONFIG_POLICY_DIGEST_SIZE], const json_t *policy, rg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    rc = config_policy_canonical(&text, &len, policy, err);
    if (rc == 0)
        rc = config_policy_digest_bytes(out, text, len, err);
    free(text);
    return rc;
}
