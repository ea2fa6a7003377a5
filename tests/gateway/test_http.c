/*
 * The HTTP edge the gateway's listeners share (gateway/http.c), in
 * process with a real libmicrohttpd daemon and libcurl as the client:
 * every answer, buffered or streamed, carries Content-Type, Cache-Control:
 * no-store and X-Content-Type-Options: nosniff before the caller's own
 * headers; a streamed body's closure is freed; a listener on port 0 names
 * the port it got, keeps its URL file only while it serves, and a bad
 * address is refused naming its config key.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/http.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/fs.h"

static char dir[PATH_MAX];
static char url_file[PATH_MAX + 16];
static gateway_http_listener *listener;
static int stream_freed;

/* The stream's closure: how many bytes are left to send, "x" each. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    size_t *left = cls;
    size_t n = *left < max ? *left : max;

    (void)pos;
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    memset(buf, 'x', n);
    *left -= n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    free(cls);
    stream_freed++;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    static const gateway_http_header extra[] = {{"X-Test", "one"}, {"WWW-Authenticate", "Basic"}};
    size_t *left;

    (void)cls;
    (void)method;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    if (!strcmp(url, "/buffer"))
        return gateway_http_respond(c, 401, "text/plain; charset=utf-8", "denied\n", 7, extra, 2);
    if (!strcmp(url, "/empty"))
        return gateway_http_respond(c, 204, "text/plain", NULL, 0, NULL, 0);
    left = malloc(sizeof(*left));
    if (left == NULL)
        return MHD_NO;
    *left = 100000; /* more than one block: the reader is called again */
    return gateway_http_stream(c, 200, "application/x-test", 4096, stream_reader, left, stream_free,
                               extra, 1);
}

static void setup(void)
{
    gateway_http_options o = GATEWAY_HTTP_OPTIONS_INIT;
    rg_error err = RG_ERROR_INIT;

    snprintf(dir, sizeof(dir), "/tmp/rg-http-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(url_file, sizeof(url_file), "%s/test.url", dir);
    o.what = "test.listen";
    o.host = "127.0.0.1";
    o.port = 0;
    o.url_file = url_file;
    o.thread_per_connection = 1;
    o.connections = 8;
    o.idle_seconds = 10;
    o.memory_limit = 64 * 1024;
    o.handle = handle;
    cr_assert_eq(gateway_http_listen(&listener, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(gateway_http_serve(listener, &err), 0, "%s", err.msg);
    stream_freed = 0;
}

static void teardown(void)
{
    gateway_http_stop(listener);
    listener = NULL;
    rg_fs_remove_tree(dir, 0, NULL);
}

TestSuite(http, .init = setup, .fini = teardown);

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    return rg_buf_append(arg, data, size * n) < 0 ? 0 : size * n;
}

/* GET `path`: the status, the header block and the body. */
static long get(const char *path, rg_buf *headers, rg_buf *body)
{
    char url[256];
    long status = 0;
    CURL *h = curl_easy_init();

    cr_assert_not_null(h);
    snprintf(url, sizeof(url), "%s%s", gateway_http_url(listener), path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    cr_assert_eq(curl_easy_perform(h), CURLE_OK, "GET %s", url);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    cr_assert_eq(rg_buf_append(headers, "", 1), 0);
    return status;
}

/* The headers every answer carries, in that order, before the caller's. */
static void assert_common(const char *headers, const char *ctype, const char *first_extra)
{
    char want[200];
    const char *ct, *cc, *ns, *ex;

    snprintf(want, sizeof(want), "Content-Type: %s\r\n", ctype);
    ct = strstr(headers, want);
    cc = strstr(headers, "Cache-Control: no-store\r\n");
    ns = strstr(headers, "X-Content-Type-Options: nosniff\r\n");
    cr_assert_not_null(ct, "no %s in:\n%s", want, headers);
    cr_assert_not_null(cc, "no Cache-Control: no-store in:\n%s", headers);
    cr_assert_not_null(ns, "no nosniff in:\n%s", headers);
    if (first_extra != NULL) {
        ex = strstr(headers, first_extra);
        cr_assert_not_null(ex, "no %s in:\n%s", first_extra, headers);
        cr_assert(ex > ct && ex > cc && ex > ns, "the caller's headers come last:\n%s", headers);
    }
}

Test(http, a_buffered_answer_carries_the_common_headers_then_the_callers)
{
    rg_buf headers = RG_BUF_INIT(64 * 1024), body = RG_BUF_INIT(64 * 1024);

    cr_assert_eq(get("/buffer", &headers, &body), 401);
    assert_common(headers.data, "text/plain; charset=utf-8", "X-Test: one\r\n");
    cr_assert_not_null(strstr(headers.data, "WWW-Authenticate: Basic\r\n"), "%s", headers.data);
    cr_assert_eq(body.len, 7);
    cr_assert_eq(memcmp(body.data, "denied\n", 7), 0);
    rg_buf_free(&headers);
    rg_buf_free(&body);
}

Test(http, an_empty_answer_still_carries_the_common_headers)
{
    rg_buf headers = RG_BUF_INIT(64 * 1024), body = RG_BUF_INIT(64 * 1024);

    cr_assert_eq(get("/empty", &headers, &body), 204);
    assert_common(headers.data, "text/plain", NULL);
    cr_assert_eq(body.len, 0);
    rg_buf_free(&headers);
    rg_buf_free(&body);
}

Test(http, a_streamed_answer_carries_the_same_headers_and_its_closure_is_freed)
{
    rg_buf headers = RG_BUF_INIT(64 * 1024), body = RG_BUF_INIT(1024 * 1024);

    cr_assert_eq(get("/stream", &headers, &body), 200);
    assert_common(headers.data, "application/x-test", "X-Test: one\r\n");
    cr_assert_null(strstr(headers.data, "WWW-Authenticate"), "only the headers it was given");
    cr_assert_eq(body.len, 100000);
    cr_assert_eq(body.data[0], 'x');
    cr_assert_eq(body.data[99999], 'x');
    /* Freed once the answer is done with it, before the next request on
     * the connection (or its close): stopping the listener ends both. */
    gateway_http_stop(listener);
    listener = NULL;
    cr_assert_eq(stream_freed, 1);
    rg_buf_free(&headers);
    rg_buf_free(&body);
}

Test(http, a_listener_on_port_0_names_its_port_and_keeps_its_url_file_while_serving)
{
    char want[200];
    rg_buf text = RG_BUF_INIT(4096);
    rg_error err = RG_ERROR_INIT;
    const char *url = gateway_http_url(listener);

    cr_assert(gateway_http_serving(listener));
    cr_assert_eq(strncmp(url, "http://127.0.0.1:", 17), 0, "%s", url);
    cr_assert_neq(strcmp(url + 17, "0"), 0, "the kernel's port, not 0: %s", url);
    snprintf(want, sizeof(want), "%s\n", url);
    cr_assert_eq(rg_fs_read_file(&text, url_file, &err), 0, "%s", err.msg);
    cr_assert_eq(text.len, strlen(want));
    cr_assert_eq(memcmp(text.data, want, text.len), 0);
    rg_buf_free(&text);
    gateway_http_stop(listener);
    listener = NULL;
    cr_assert_eq(access(url_file, F_OK), -1, "the URL file goes with the listener");
}

Test(http, a_listener_that_was_never_served_writes_no_url_file)
{
    gateway_http_options o = GATEWAY_HTTP_OPTIONS_INIT;
    gateway_http_listener *l = NULL;
    rg_error err = RG_ERROR_INIT;
    char other[PATH_MAX + 16];

    snprintf(other, sizeof(other), "%s/other.url", dir);
    o.what = "other.listen";
    o.host = "127.0.0.1";
    o.url_file = other;
    o.handle = handle;
    cr_assert_eq(gateway_http_listen(&l, &o, &err), 0, "%s", err.msg);
    cr_assert_not(gateway_http_serving(l));
    cr_assert_eq(access(other, F_OK), -1);
    gateway_http_stop(l);
}

Test(http, a_bad_address_is_refused_naming_its_config_key)
{
    gateway_http_options o = GATEWAY_HTTP_OPTIONS_INIT;
    gateway_http_listener *l = NULL;
    rg_error err = RG_ERROR_INIT;

    o.what = "admin.listen";
    /* A documentation address (TEST-NET-1): no interface here has it. */
    o.host = "192.0.2.1";
    o.handle = handle;
    cr_assert_lt(gateway_http_listen(&l, &o, &err), 0);
    cr_assert_null(l);
    cr_assert_not_null(strstr(err.msg, "admin.listen"), "%s", err.msg);
}
