#ifndef LATCHKEY_CCURL_SHIM_H
#define LATCHKEY_CCURL_SHIM_H
#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are C variadics, which Swift cannot call: one typed
// wrapper per argument kind.
static inline CURLcode latchkey_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode latchkey_curl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode latchkey_curl_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode latchkey_curl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode latchkey_curl_setopt_offset(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
typedef size_t (*latchkey_curl_write_fn)(char *data, size_t size, size_t count, void *context);
static inline CURLcode latchkey_curl_setopt_write(CURL *h, latchkey_curl_write_fn f) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
// SMTP (Curl.sendMail): the message is read from a callback while uploading.
typedef size_t (*latchkey_curl_read_fn)(char *buffer, size_t size, size_t count, void *context);
static inline CURLcode latchkey_curl_setopt_read(CURL *h, latchkey_curl_read_fn f) { return curl_easy_setopt(h, CURLOPT_READFUNCTION, f); }
static inline CURLcode latchkey_curl_setopt_offset_t(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode latchkey_curl_smtp_reply(CURL *h, long *code) { return curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code); }
static inline CURLcode latchkey_curl_response_code(CURL *h, long *code) { return curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code); }
// Pinned webhook deliveries (Curl.perform with `connectOnlyTo`): every socket libcurl opens goes
// through this callback, which refuses an address that was not checked.
static inline CURLcode latchkey_curl_setopt_opensocket(CURL *h, curl_opensocket_callback f) { return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f); }
#endif
