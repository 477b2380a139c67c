// Typed, non-variadic wrappers around libcurl.
//
// Why this shim exists: curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are C variadic
// functions, which Swift cannot call. Each wrapper below fixes one argument type, so the Swift side
// stays type-checked and never passes a value of the wrong width through `...`.
#ifndef SPOOLFETCH_CCURL_SHIM_H
#define SPOOLFETCH_CCURL_SHIM_H

#include <curl/curl.h>
#include <stddef.h>

/// Signature of CURLOPT_WRITEFUNCTION / CURLOPT_HEADERFUNCTION callbacks.
typedef size_t (*spoolfetch_data_callback)(char *data, size_t size, size_t count, void *context);
/// Signature of CURLOPT_SEEKFUNCTION callbacks.
typedef int (*spoolfetch_seek_callback)(void *context, curl_off_t offset, int origin);
/// Signature of CURLOPT_XFERINFOFUNCTION callbacks.
typedef int (*spoolfetch_xferinfo_callback)(void *context, curl_off_t dltotal, curl_off_t dlnow,
                                            curl_off_t ultotal, curl_off_t ulnow);
/// Signature of CURLOPT_OPENSOCKETFUNCTION callbacks: called with the resolved address of every
/// connection libcurl is about to open (redirects and each A/AAAA record included).
typedef curl_socket_t (*spoolfetch_opensocket_callback)(void *context, curlsocktype purpose,
                                                        struct curl_sockaddr *address);

static inline CURLcode spoolfetch_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode spoolfetch_easy_setopt_off(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode spoolfetch_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode spoolfetch_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode spoolfetch_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode spoolfetch_easy_setopt_data_callback(CURL *easy, CURLoption option,
                                                            spoolfetch_data_callback value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode spoolfetch_easy_setopt_seek_callback(CURL *easy, spoolfetch_seek_callback value) {
    return curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, value);
}
static inline CURLcode spoolfetch_easy_setopt_xferinfo_callback(CURL *easy,
                                                                spoolfetch_xferinfo_callback value) {
    return curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, value);
}

static inline CURLcode spoolfetch_easy_setopt_opensocket_callback(CURL *easy,
                                                                  spoolfetch_opensocket_callback value) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, value);
}
/// What an open-socket callback returns to refuse a connection: libcurl then tries the next
/// address, and fails with CURLE_COULDNT_CONNECT when none is left.
static inline curl_socket_t spoolfetch_socket_bad(void) { return CURL_SOCKET_BAD; }

static inline CURLcode spoolfetch_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLcode spoolfetch_easy_getinfo_off(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLcode spoolfetch_easy_getinfo_string(CURL *easy, CURLINFO info, char **value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLcode spoolfetch_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLMcode spoolfetch_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/// What a write callback returns to pause its transfer (libcurl keeps the data and delivers it
/// again after `spoolfetch_easy_unpause`).
static inline size_t spoolfetch_writefunc_pause(void) {
    return CURL_WRITEFUNC_PAUSE;
}
/// What a read callback returns to pause its upload (resumed by `spoolfetch_easy_unpause`), or
/// to abort it.
static inline size_t spoolfetch_readfunc_pause(void) {
    return CURL_READFUNC_PAUSE;
}
static inline size_t spoolfetch_readfunc_abort(void) {
    return CURL_READFUNC_ABORT;
}
/// What a seek callback returns: done, or this stream cannot go there.
static inline int spoolfetch_seekfunc_ok(void) { return CURL_SEEKFUNC_OK; }
static inline int spoolfetch_seekfunc_cantseek(void) { return CURL_SEEKFUNC_CANTSEEK; }
/// Resumes a transfer paused by its write callback. libcurl may call the write callback from
/// inside this call with the data it kept.
static inline CURLcode spoolfetch_easy_unpause(CURL *easy) {
    return curl_easy_pause(easy, CURLPAUSE_CONT);
}

/// `CURLMsg.data` is a union; Swift imports it awkwardly, so read the result field here.
static inline CURLcode spoolfetch_msg_result(const CURLMsg *msg) {
    return msg->data.result;
}

#endif
