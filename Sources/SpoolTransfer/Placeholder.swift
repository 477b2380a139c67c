internal import CCurl
import Crypto
public enum TransferPlaceholder { public static func x() { _ = curl_multi_init(); _ = SHA256() } }
