import Foundation
import SpoolTestSupport
import XCTest

/// Private S3 buckets by reference: a credentials file's AWS SigV4 keys sign every request of the
/// item, against moto's S3 server with signature checking on (an unsigned or wrongly signed
/// request is refused there, so a published body proves each of its requests was signed). The
/// credentials file and the request are the README's ("Private S3 buckets"), run as they stand.
final class S3Tests: SpoolTestCase {
    private let bucket = "nightly-exports"
    private let objectKey = "db/2026-12-05.dump"
    private let size = 64 << 20

    func testASignedSegmentedObjectIsPublishedAndAWrongSecretFailsAtOnceWithTheServersCode() throws {
        let scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-s3")
        addTeardownBlock { try? FileManager.default.removeItem(atPath: scratch) }
        XCTAssertEqual(chmod(scratch, 0o700), 0)
        let body = TestBody.random(count: size, seed: 62)
        try Data(body).write(to: URL(fileURLWithPath: scratch + "/object"))
        try Data("small\n".utf8).write(to: URL(fileURLWithPath: scratch + "/small"))
        let moto = try MotoS3Server(bucket: bucket, objects: [objectKey: scratch + "/object", "db/small.txt": scratch + "/small"])
        let endpoint = moto.url("")

        // The README's two blocks, with its example keys replaced by moto's and AWS's endpoint by moto's.
        let readmeCredentials = try ReadmeExample.block(startingWith: "# /etc/spoolfetch/credentials/nightly-exports")
        let readmeRequest = try ReadmeExample.block(startingWith: "# a request: a 64 MiB dump over four signed connections")
        XCTAssertTrue(readmeCredentials.contains("AKIAIOSFODNN7EXAMPLE") && readmeRequest.contains("https://s3.us-east-1.amazonaws.com/"))
        let credentials = readmeCredentials.replacingOccurrences(of: "AKIAIOSFODNN7EXAMPLE", with: moto.accessKeyId)
            .replacingOccurrences(of: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", with: moto.secretAccessKey)
        let dir = scratch + "/credentials"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func write(_ name: String, _ text: String) throws {
            try text.write(toFile: dir + "/" + name, atomically: false, encoding: .utf8)
            XCTAssertEqual(chmod(dir + "/" + name, 0o600), 0)
        }
        try write("nightly-exports", credentials)
        let wrongSecret = "WRONG" + String(moto.secretAccessKey.dropFirst(5))
        try write("wrong-secret", credentials.replacingOccurrences(of: moto.secretAccessKey, with: wrongSecret))
        try write("no-secret", credentials.split(separator: "\n").filter { !$0.hasPrefix("AWS-Secret") }.joined(separator: "\n"))
        try write("bad-provider", credentials.replacingOccurrences(of: "aws:amz:us-east-1:s3", with: "aws:amz:us-east-1"))

        try spool.drop("nightly-exports", readmeRequest.replacingOccurrences(of: "https://s3.us-east-1.amazonaws.com", with: endpoint))
        try spool.drop("refused", """
            url: \(moto.url("/\(bucket)/db/small.txt"))
            credentials: wrong-secret
            url: \(moto.url("/\(bucket)/db/small.txt"))
            credentials: no-secret
            url: \(moto.url("/\(bucket)/db/small.txt"))
            credentials: bad-provider
            """)
        let started = Date()
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--credentials-dir", dir, "--log-level", "debug"],
                                                       timeout: 300)
        let seconds = -started.timeIntervalSinceNow
        XCTAssertEqual(status, 1, "one request published, one failed: \(stderr)")

        // The 64 MiB object: byte-identical, in segments, each segment's range signed on its own.
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "2026-12-05.dump")), TestBody.sha256Hex(body))
        let marker = try json("final", "2026-12-05.dump.done")
        XCTAssertGreaterThan(marker["connections"] as? Int ?? 1, 1, "fetched in segments")
        let gets = moto.requests().filter { $0.path == "/\(bucket)/\(objectKey)" }
        let ranged = gets.filter { $0.status == 206 }
        XCTAssertGreaterThanOrEqual(ranged.count, 3, "several ranges: \(gets)")
        XCTAssertEqual(Set(ranged.map(\.range)).count, ranged.count, "each range asked once, signed for itself")
        XCTAssertTrue(gets.allSatisfy { $0.signed && ($0.status == 200 || $0.status == 206) }, "every request signed and accepted: \(gets)")
        print("S3 round: \(size) bytes in \(gets.count) signed requests (\(ranged.count) ranges), "
              + "\(marker["connections"] ?? "?") connections, drain \(String(format: "%.1f", seconds)) s")

        // A wrong secret: one request, refused with 403 and S3's own code; no retry.
        let items = try XCTUnwrap(try json("failed", "refused.error")["items"] as? [[String: Any]])
        XCTAssertEqual(items.count, 3)
        XCTAssertEqual(items[0]["code"] as? String, "http-status")
        XCTAssertEqual(items[0]["httpStatus"] as? Int, 403)
        XCTAssertEqual(items[0]["attempts"] as? Int, 1)
        let message = items[0]["message"] as? String ?? ""
        XCTAssertTrue(message.hasPrefix("HTTP status 403 (SignatureDoesNotMatch: The request signature we calculated"), message)
        let small = moto.requests().filter { $0.path == "/\(bucket)/db/small.txt" }
        XCTAssertEqual(small.map(\.status), [403], "the wrong secret asked once, and only it asked: \(small)")
        XCTAssertTrue(small.allSatisfy(\.signed))

        // Unusable keys: refused before any request, naming the credentials and the line, never a value.
        XCTAssertEqual(items[1]["code"] as? String, "credentials")
        XCTAssertEqual(items[1]["message"] as? String,
                       "credentials 'no-secret': AWS-SigV4 needs both an AWS-Access-Key-Id and an AWS-Secret-Access-Key line")
        XCTAssertEqual(items[2]["code"] as? String, "credentials")
        XCTAssertEqual(items[2]["message"] as? String,
                       "credentials 'bad-provider': AWS-SigV4 must be aws:amz:REGION:SERVICE, such as aws:amz:eu-west-1:s3")

        // An upload to the bucket, signed with UNSIGNED-PAYLOAD (its body is read as it is sent),
        // then fetched back signed: the same bytes.
        let report = TestBody.random(count: 3 << 20, seed: 63)
        try FileManager.default.createDirectory(atPath: spool.path("outgoing"), withIntermediateDirectories: true)
        try Data(report).write(to: URL(fileURLWithPath: spool.path("tmp", ".report.bin")))
        XCTAssertEqual(rename(spool.path("tmp", ".report.bin"), spool.path("outgoing", "report.bin")), 0)
        try spool.drop("upload", "credentials: nightly-exports\nurl: \(moto.url("/\(bucket)/reports/report.bin"))\nupload: report.bin\n")
        let (uploaded, uploadLog) = try DaemonProcess.drain(spool: spool.root, extra: ["--credentials-dir", dir], timeout: 120)
        XCTAssertEqual(uploaded, 0, uploadLog)
        XCTAssertEqual(moto.requests().filter { $0.method == "PUT" }.map(\.status), [200])
        try spool.drop("fetch-back", "credentials: nightly-exports\nurl: \(moto.url("/\(bucket)/reports/report.bin"))\nname: report-back.bin\n")
        let (fetched, fetchLog) = try DaemonProcess.drain(spool: spool.root, extra: ["--credentials-dir", dir], timeout: 120)
        XCTAssertEqual(fetched, 0, fetchLog)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "report-back.bin")), TestBody.sha256Hex(report))

        // Neither key nor secret anywhere in the spool or the daemon's log.
        for secret in [moto.secretAccessKey, wrongSecret, moto.accessKeyId] {
            XCTAssertFalse((stderr + uploadLog + fetchLog).contains(secret), "the log must not hold \(secret)")
            for file in SpoolFiles.all(under: spool.root) where !file.hasSuffix("/final/2026-12-05.dump") {
                let text = String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self)
                XCTAssertFalse(text.contains(secret), "\(file) must not hold \(secret)")
            }
        }
    }
}

extension S3Tests {
    /// A signed segmented transfer killed with -9 and started again: the restart asks only for
    /// what is missing, each range signed when it is sent (moto refuses any other), and the file
    /// published is the object.
    func testAResumeAfterKillNineSignsEachMissingRangeAnew() throws {
        let scratch = try TempSpool.makeScratchFolder(prefix: "spoolfetch-s3-resume")
        addTeardownBlock { try? FileManager.default.removeItem(atPath: scratch) }
        XCTAssertEqual(chmod(scratch, 0o700), 0)
        let body = TestBody.random(count: 24 << 20, seed: 64)
        try Data(body).write(to: URL(fileURLWithPath: scratch + "/object"))
        let moto = try MotoS3Server(bucket: bucket, objects: ["db/resume.dump": scratch + "/object"])
        try FileManager.default.createDirectory(atPath: scratch + "/credentials", withIntermediateDirectories: true)
        let credentials = scratch + "/credentials/bucket"
        try "AWS-SigV4: aws:amz:us-east-1:s3\nAWS-Access-Key-Id: \(moto.accessKeyId)\nAWS-Secret-Access-Key: \(moto.secretAccessKey)\n"
            .write(toFile: credentials, atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(credentials, 0o600), 0)
        try spool.drop("resume", "credentials: bucket\nurl: \(moto.url("/\(bucket)/db/resume.dump"))\n")
        let arguments = ["--credentials-dir", scratch + "/credentials", "--sync-every", "1M", "--max-rate", "4M"]
        let first = try DaemonProcess.launch(["run", "--spool", spool.root] + arguments)
        try DirectoryWaiter.wait(in: spool.path("staging"), timeout: 60, what: "a state with ranges durable in part") {
            guard let name = self.spool.files(in: "staging").first(where: { $0.hasSuffix(".state") }),
                  let bytes = try? self.spool.read("staging", name),
                  let state = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                  let ranges = state["ranges"] as? [[Int]] else { return false }
            return ranges.filter { $0.count == 4 && $0[3] > $0[0] }.count >= 2
        }
        first.signal(SIGKILL)
        XCTAssertEqual(try first.waitForExit(timeout: 10), 128 + SIGKILL)
        let before = moto.requests().count
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: arguments, timeout: 120)
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(TestBody.sha256Hex(try spool.read("final", "resume.dump")), TestBody.sha256Hex(body))
        let after = moto.requests().dropFirst(before)
        XCTAssertFalse(after.isEmpty)
        XCTAssertTrue(after.allSatisfy { $0.signed && $0.status == 206 && $0.range.hasPrefix("bytes=") }, "\(Array(after))")
        let asked = after.map { request -> Int in
            let spec = request.range.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
            guard spec.count == 2, let from = Int(spec[0]) else { return body.count }
            return (Int(spec[1]).map { $0 + 1 } ?? body.count) - from
        }.reduce(0, +)
        XCTAssertLessThan(asked, body.count, "only what was missing asked again: \(Array(after))")
        print("S3 resume round: \(body.count) bytes, \(before) requests before kill -9, \(after.count) signed ranges after")
    }
}

/// Every file under a folder, for tests that look for a secret in all of them.
enum SpoolFiles {
    static func all(under root: String) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: root) else { return [] }
        return e.compactMap { $0 as? String }.map { root + "/" + $0 }.filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDir) && !isDir.boolValue
        }
    }
}

/// What a signed request carries, seen by the in-process server (which checks no signature): the
/// signature's scope and signed headers, the session token, the payload hash — and that none of
/// the credentials file's own lines goes out as a header, nor the signature to another host.
final class SigV4RequestTests: SpoolTestCase {
    func testSignedRequestsCarryTheTokenAndPayloadHashAndNoSignatureFollowsARedirectElsewhere() throws {
        let other = try TestHTTPServer.start()
        defer { try? other.shutdown() }
        let secrets = try TempSpool.makeScratchFolder(prefix: "spoolfetch-sigv4")
        addTeardownBlock { try? FileManager.default.removeItem(atPath: secrets) }
        XCTAssertEqual(chmod(secrets, 0o700), 0)
        try """
            AWS-SigV4: aws:amz:eu-west-1:s3
            aws-access-key-id: AKIDTESTSIGV4
            AWS-Secret-Access-Key: SECRET-SIGV4-77
            AWS-Session-Token: TOKEN-SIGV4-31
            """.write(toFile: secrets + "/bucket", atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(secrets + "/bucket", 0o600), 0)
        server.serve("/b/k.txt", body: Array("k".utf8))
        server.serve("/b/away", body: [], script: [.redirect(to: "http://localhost:\(other.port)/elsewhere.txt")])
        other.serve("/elsewhere.txt", body: Array("e".utf8))
        try spool.drop("signed", "credentials: bucket\nurl: \(server.url("/b/k.txt"))\nurl: \(server.url("/b/away"))\n")
        let (status, stderr) = try DaemonProcess.drain(spool: spool.root, extra: ["--credentials-dir", secrets, "--log-level", "debug"])
        XCTAssertEqual(status, 0, stderr)
        let request = try XCTUnwrap(server.requests(for: "/b/k.txt").first)
        let authorization = try XCTUnwrap(request.header("Authorization"))
        XCTAssertTrue(authorization.hasPrefix("AWS4-HMAC-SHA256 Credential=AKIDTESTSIGV4/"), authorization)
        XCTAssertTrue(authorization.contains("/eu-west-1/s3/aws4_request"), authorization)
        XCTAssertTrue(authorization.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token"), authorization)
        XCTAssertEqual(request.header("X-Amz-Security-Token"), "TOKEN-SIGV4-31")
        XCTAssertEqual(request.header("x-amz-content-sha256"), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        for line in ["AWS-SigV4", "AWS-Access-Key-Id", "AWS-Secret-Access-Key", "AWS-Session-Token"] {
            XCTAssertNil(request.header(line), "\(line) is not a header")
        }
        XCTAssertNotNil(server.requests(for: "/b/away").first?.header("Authorization"))
        let away = try XCTUnwrap(other.requests(for: "/elsewhere.txt").first)
        XCTAssertNil(away.header("Authorization"), "no signature for another host")
        XCTAssertEqual(try spool.read("final", "away"), Array("e".utf8))
        for secret in ["SECRET-SIGV4-77", "TOKEN-SIGV4-31", "AKIDTESTSIGV4"] {
            XCTAssertFalse(stderr.contains(secret), "the log must not hold \(secret)")
            for file in SpoolFiles.all(under: spool.root) {
                XCTAssertFalse(String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self).contains(secret),
                               "\(file) must not hold \(secret)")
            }
        }
    }
}
